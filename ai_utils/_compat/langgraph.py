"""The one place that touches LangGraph's private API (``langgraph``, ``langgraph-checkpoint``).

- `RunnableCallable`: the sync/async node pair LangChain's own ``create_agent`` builds its nodes from.
- `DeltaSnapshot`: the blob a `DeltaChannel` stores as its snapshot (``checkpoint["channel_values"]``).
- `messages_delta_reducer`: the reducer LangGraph documents for ``DeltaChannel`` message lists; it is
  underscore-named only because `DeltaChannel` is still beta.
- `TASKS_CHANNEL`: the channel pending ``Send`` tasks are written to.
- `store_cursor` / `store_prefix`: a cursor on a `PostgresStore` / `SqliteStore`'s own connection and the text
  their ``store`` table keys a namespace by (their private ``_cursor`` and ``_namespace_to_text``), for the one
  conditional ``UPDATE`` `BaseStore` has no operation for (``ai_utils.recall._claims``).
"""

from __future__ import annotations

import importlib
from contextlib import AbstractContextManager
from typing import Any

from langgraph._internal._runnable import RunnableCallable
from langgraph.checkpoint.serde.types import _DeltaSnapshot as DeltaSnapshot
from langgraph.graph.message import _messages_delta_reducer as messages_delta_reducer

__all__ = [
    "ERROR_CHANNEL",
    "TASKS_CHANNEL",
    "DeltaSnapshot",
    "RunnableCallable",
    "messages_delta_reducer",
    "store_cursor",
    "store_prefix",
]

# Kept as a literal (`langgraph._internal._constants.TASKS`) so reading it costs no private import at run time.
TASKS_CHANNEL = "__pregel_tasks"
# `langgraph._internal._constants.ERROR`: the pending write holding a failed task's exception.
ERROR_CHANNEL = "__error__"


def store_cursor(store: Any) -> AbstractContextManager[Any]:
    """A cursor on a `PostgresStore` / `SqliteStore`'s connection (their ``_cursor()``; SQLite's in a transaction)."""
    cursor: AbstractContextManager[Any] = store._cursor()
    return cursor


def store_prefix(store: Any, namespace: tuple[str, ...]) -> str:
    """The ``prefix`` column value a `PostgresStore` / `SqliteStore` keeps ``namespace`` under."""
    module = importlib.import_module(type(store).__module__)
    prefix: str = module._namespace_to_text(namespace)
    return prefix
