"""Memory: checkpoint savers for LangGraph threads and helpers to read and summarize them.

- `MemorySaver`: LangGraph's in-memory saver (tests, demos; gone when the process ends).
- `sqlite_saver(path)`: the embedded durable default (extra ``sqlite``).
- `postgres_saver(conn_string)`: Postgres for several processes or machines (extra ``postgres``).
- `SupabaseCheckpointSaver(client)`: checkpoints in Supabase over PostgREST (extra ``supabase``); its
  tables come from `supabase_checkpoints_sql()`.
- `SmartCheckpointSaver(inner)`: wraps any saver and keeps threads within a token budget.
- `get_messages_array_from_checkpoint`, `format_checkpoint_messages_for_llm`, `chat_summarizer`.

Every saver works from sync (``invoke``/``stream``) and async (``ainvoke``/``astream``) runs. For the
strongest crash safety run graphs with ``durability="sync"``: each step's checkpoint is written before
the next step starts, so a killed process resumes with ``graph.invoke(None, config)`` exactly where it
stopped (``"async"``, LangGraph's default, may lose the last step; ``"exit"`` saves only at the end).

Importing this package loads no optional dependency: the factories import their backend when called
and the classes load on first access.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports

if TYPE_CHECKING:
    from langgraph.checkpoint.memory import InMemorySaver as MemorySaver

    from ai_utils.memory._messages import (
        achat_summarizer,
        aget_messages_array_from_checkpoint,
        chat_summarizer,
        format_checkpoint_messages_for_llm,
        get_messages_array_from_checkpoint,
    )
    from ai_utils.memory.postgres import PostgresCheckpointSaver
    from ai_utils.memory.smart import SmartCheckpointSaver
    from ai_utils.memory.sqlite import SqliteCheckpointSaver
    from ai_utils.memory.supabase import SupabaseCheckpointError, SupabaseCheckpointSaver, supabase_checkpoints_sql

__all__ = [
    "MemorySaver",
    "PostgresCheckpointSaver",
    "SmartCheckpointSaver",
    "SqliteCheckpointSaver",
    "SupabaseCheckpointError",
    "SupabaseCheckpointSaver",
    "achat_summarizer",
    "aget_messages_array_from_checkpoint",
    "chat_summarizer",
    "format_checkpoint_messages_for_llm",
    "get_messages_array_from_checkpoint",
    "postgres_saver",
    "sqlite_saver",
    "supabase_checkpoints_sql",
]

# module -> the names it defines, loaded on first access (PEP 562) so optional extras stay optional.
_MODULES: dict[str, tuple[str, ...]] = {
    "ai_utils.memory._messages": (
        "achat_summarizer",
        "aget_messages_array_from_checkpoint",
        "chat_summarizer",
        "format_checkpoint_messages_for_llm",
        "get_messages_array_from_checkpoint",
    ),
    "ai_utils.memory.postgres": ("PostgresCheckpointSaver",),
    "ai_utils.memory.smart": ("SmartCheckpointSaver",),
    "ai_utils.memory.sqlite": ("SqliteCheckpointSaver",),
    "ai_utils.memory.supabase": ("SupabaseCheckpointError", "SupabaseCheckpointSaver", "supabase_checkpoints_sql"),
}
# name -> (module, attribute); LangGraph's saver keeps its own name.
_LAZY: dict[str, tuple[str, str]] = {
    "MemorySaver": ("langgraph.checkpoint.memory", "InMemorySaver"),
    **{name: (module, name) for module, names in _MODULES.items() for name in names},
}


def sqlite_saver(path: str | os.PathLike[str], *, run_lock_timeout: float = 60.0) -> SqliteCheckpointSaver:
    """Open (or create) a SQLite checkpoint saver; see `ai_utils.memory.sqlite.sqlite_saver`.

    Args:
        path: the database file (parent folders are created) or ``":memory:"``.
        run_lock_timeout: how long a run waits for another process's run on the same thread (then
            `ThreadBusyError`, before it runs).

    Returns:
        A saver usable from sync and async runs; close it with ``.close()`` or a ``with`` block.
    """
    from ai_utils.memory.sqlite import sqlite_saver as _sqlite_saver

    return _sqlite_saver(path, run_lock_timeout=run_lock_timeout)


def postgres_saver(
    conn_string: str, *, min_size: int = 1, max_size: int = 4, run_lock_timeout: float = 60.0
) -> PostgresCheckpointSaver:
    """Connect a Postgres checkpoint saver; see `ai_utils.memory.postgres.postgres_saver`.

    Args:
        conn_string: a libpq URI, e.g. ``"postgresql://user:pw@host:5432/db"``.
        min_size: connections the pool keeps open.
        max_size: the most connections the pool opens.
        run_lock_timeout: how long a run waits for another process's run on the same thread (then
            `ThreadBusyError`, before it runs).

    Returns:
        A saver usable from sync and async runs; close it with ``.close()`` or a ``with`` block.
    """
    from ai_utils.memory.postgres import postgres_saver as _postgres_saver

    return _postgres_saver(conn_string, min_size=min_size, max_size=max_size, run_lock_timeout=run_lock_timeout)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
