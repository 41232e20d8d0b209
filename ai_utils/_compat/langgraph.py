"""The one place that touches LangGraph's private API (``langgraph``, ``langgraph-checkpoint``).

- `RunnableCallable`: the sync/async node pair LangChain's own ``create_agent`` builds its nodes from.
- `DeltaSnapshot`: the blob a `DeltaChannel` stores as its snapshot (``checkpoint["channel_values"]``).
- `messages_delta_reducer`: the reducer LangGraph documents for ``DeltaChannel`` message lists; it is
  underscore-named only because `DeltaChannel` is still beta.
- `TASKS_CHANNEL`: the channel pending ``Send`` tasks are written to.
- `quiet_tool_runtime` / `quiet_tool_schema`: pydantic never checks an injected `ToolRuntime`'s ``context`` against
  a type, so its warnings never quote the context (the one change to a dependency's class we make; see why there).
- `store_cursor` / `store_prefix`: a cursor on a `PostgresStore` / `SqliteStore`'s own connection and the text
  their ``store`` table keys a namespace by (their private ``_cursor`` and ``_namespace_to_text``), for the one
  conditional ``UPDATE`` `BaseStore` has no operation for (``ai_utils.recall._claims``).
"""

from __future__ import annotations

import importlib
import threading
import weakref
from contextlib import AbstractContextManager
from typing import Any

from langgraph._internal._runnable import RunnableCallable
from langgraph.checkpoint.serde.types import _DeltaSnapshot as DeltaSnapshot
from langgraph.graph.message import _messages_delta_reducer as messages_delta_reducer
from langgraph.prebuilt.tool_node import ToolRuntime
from pydantic import BaseModel

__all__ = [
    "ERROR_CHANNEL",
    "TASKS_CHANNEL",
    "DeltaSnapshot",
    "RunnableCallable",
    "messages_delta_reducer",
    "quiet_tool_runtime",
    "quiet_tool_schema",
    "store_cursor",
    "store_prefix",
]

# Kept as a literal (`langgraph._internal._constants.TASKS`) so reading it costs no private import at run time.
TASKS_CHANNEL = "__pregel_tasks"
# `langgraph._internal._constants.ERROR`: the pending write holding a failed task's exception.
ERROR_CHANNEL = "__error__"


_PATCH_LOCK = threading.Lock()


def quiet_tool_runtime() -> None:
    """Type the ``context`` field of LangGraph's `ToolRuntime` as ``Any`` for pydantic (idempotent).

    LangChain validates a tool call with the tool's args schema and then ``model_dump()``s the result
    (``BaseTool._parse_input``) only to see which keys were given; the dump of the injected runtime is thrown
    away (the raw object is passed on). That dump serialises the runtime's fields against their declared types,
    and ``context`` is declared by the type variable the tool's annotation fills in: a bare ``runtime:
    ToolRuntime`` means ``None`` (the variable's default), ``ToolRuntime[None, FilesystemState]`` (deepagents' file
    tools) too, and ``ToolRuntime[Other]`` another type. Any other real context makes pydantic warn, and the
    warning quotes the value: an API token on stderr and in logs, or in an error message under ``-W error``
    (langgraph#8417, deepagents#491). With the field typed ``Any`` no type is checked, so nothing is quoted.

    Pydantic reads a standard dataclass's field types from ``__dataclass_fields__`` (its own
    ``__get_pydantic_core_schema__`` hook is skipped for parametrised generic dataclasses), so that is the one
    value changed; nothing else reads it. `tests/test_compat.py` checks the field is still there.
    """
    field = ToolRuntime.__dataclass_fields__["context"]
    if field.type is Any:
        return
    with _PATCH_LOCK:
        field.type = Any


_QUIETED: weakref.WeakSet[type[BaseModel]] = weakref.WeakSet()


def quiet_tool_schema(schema: Any) -> None:
    """Rebuild a tool's args ``schema`` that was built before `quiet_tool_runtime` (it still checks ``context``)."""
    if not isinstance(schema, type) or not issubclass(schema, BaseModel) or schema in _QUIETED:
        return
    if _checks_context(getattr(schema, "__pydantic_core_schema__", None)):
        schema.model_rebuild(force=True)
    _QUIETED.add(schema)


def _checks_context(node: Any) -> bool:
    """Whether a core schema holds a `ToolRuntime` whose ``context`` field has a type other than ``any``."""
    if isinstance(node, dict):
        cls = node.get("cls")
        if node.get("type") == "dataclass" and isinstance(cls, type) and issubclass(cls, ToolRuntime):
            fields = node.get("schema", {}).get("fields", [])
            return any(f.get("name") == "context" and f.get("schema", {}).get("type") != "any" for f in fields)
        return any(_checks_context(value) for value in node.values())
    if isinstance(node, list):
        return any(_checks_context(value) for value in node)
    return False


def store_cursor(store: Any) -> AbstractContextManager[Any]:
    """A cursor on a `PostgresStore` / `SqliteStore`'s connection (their ``_cursor()``; SQLite's in a transaction)."""
    cursor: AbstractContextManager[Any] = store._cursor()
    return cursor


def store_prefix(store: Any, namespace: tuple[str, ...]) -> str:
    """The ``prefix`` column value a `PostgresStore` / `SqliteStore` keeps ``namespace`` under."""
    module = importlib.import_module(type(store).__module__)
    prefix: str = module._namespace_to_text(namespace)
    return prefix
