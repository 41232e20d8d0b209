"""The one place that touches LangGraph's private API (``langgraph``, ``langgraph-checkpoint``).

- `RunnableCallable`: the sync/async node pair LangChain's own ``create_agent`` builds its nodes from.
- `DeltaSnapshot`: the blob a `DeltaChannel` stores as its snapshot (``checkpoint["channel_values"]``).
- `messages_delta_reducer`: the reducer LangGraph documents for ``DeltaChannel`` message lists; it is
  underscore-named only because `DeltaChannel` is still beta.
- `TASKS_CHANNEL`: the channel pending ``Send`` tasks are written to.
"""

from __future__ import annotations

from langgraph._internal._runnable import RunnableCallable
from langgraph.checkpoint.serde.types import _DeltaSnapshot as DeltaSnapshot
from langgraph.graph.message import _messages_delta_reducer as messages_delta_reducer

__all__ = ["TASKS_CHANNEL", "DeltaSnapshot", "RunnableCallable", "messages_delta_reducer"]

# Kept as a literal (`langgraph._internal._constants.TASKS`) so reading it costs no private import at run time.
TASKS_CHANNEL = "__pregel_tasks"
