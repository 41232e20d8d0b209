"""The Agent's graph state: ``messages`` on a LangGraph `DeltaChannel`.

A plain ``add_messages`` channel stores the whole history in every checkpoint, so a thread's storage
grows with the square of its length; a delta channel stores each step's new messages (plus a snapshot
every 50 updates), so storage grows linearly. deepagents uses the same channel for its threads.
"""

from __future__ import annotations

from typing import Annotated, Any, Required

from langchain.agents import AgentState as _LangChainAgentState
from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel

from ai_utils._compat.langgraph import messages_delta_reducer

__all__ = ["AgentState", "SNAPSHOT_FREQUENCY"]

SNAPSHOT_FREQUENCY = 50


class AgentState(_LangChainAgentState[Any]):
    """`create_agent`'s state with delta-stored messages."""

    messages: Required[
        Annotated[list[AnyMessage], DeltaChannel(messages_delta_reducer, snapshot_frequency=SNAPSHOT_FREQUENCY)]
    ]
