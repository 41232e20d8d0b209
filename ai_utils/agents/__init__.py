"""Agents: `Agent` (tool loop on `create_agent`), and the run record and trace events every wrapper's run has."""

from __future__ import annotations

from ai_utils._run.record import AgentRun, AgentTraceEvent
from ai_utils.agents.agent import Agent

__all__ = ["Agent", "AgentRun", "AgentTraceEvent"]
