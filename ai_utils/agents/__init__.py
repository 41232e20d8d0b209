"""Agents: `Agent` (tool loop on `create_agent`)."""

from __future__ import annotations

from ai_utils.agents.agent import Agent

__all__ = ["Agent"]
