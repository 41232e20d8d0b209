"""SQLite checkpoints: the embedded, durable default for one machine (extra ``sqlite``)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from ai_utils._optional import missing_extra
from ai_utils.exceptions import UserError
from ai_utils.memory._closeable import Closeable
from ai_utils.memory._runlock import RunLocks, check_lock_timeout, file_run_locks
from ai_utils.memory._threaded import ThreadedAsyncSaver

try:
    from langgraph.checkpoint.sqlite import SqliteSaver
except ImportError as _import_error:
    raise missing_extra("langgraph-checkpoint-sqlite", extra="sqlite", feature="sqlite_saver()") from _import_error

__all__ = ["SqliteCheckpointSaver", "sqlite_saver"]

MEMORY = ":memory:"


def _check_path(path: Any) -> str:
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise UserError(
            f"sqlite_saver(path) needs a file path (str or pathlib.Path) or ':memory:', got {path!r}. "
            "Pass e.g. 'data/checkpoints.sqlite'."
        )
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"sqlite_saver(path) needs a non-empty path, got {path!r}. Pass e.g. 'checkpoints.sqlite'.")
    if text == MEMORY:
        return text
    file = Path(text).expanduser()
    if file.is_dir():
        raise UserError(
            f"sqlite_saver(path) got the folder {text!r}; pass a file inside it, e.g. '{file}/checkpoints.sqlite'."
        )
    file.parent.mkdir(parents=True, exist_ok=True)
    return str(file)


class SqliteCheckpointSaver(Closeable, ThreadedAsyncSaver, SqliteSaver):
    """LangGraph's ``SqliteSaver`` tuned for durability and usable from sync and async runs.

    The sync methods are ``SqliteSaver``'s. The async methods (``aget_tuple``, ``alist``, ``aput``,
    ``aput_writes``, ``adelete_thread``) run those same methods in a worker thread instead of using
    ``AsyncSqliteSaver``, whose connection is tied to the event loop that opened it: one saver object
    then serves ``invoke`` and ``ainvoke`` in any loop, over one connection and one lock.

    The connection uses ``journal_mode=WAL`` and ``synchronous=NORMAL`` (about 30% less per-turn cost
    than the defaults). A commit is then safe against a crash or ``kill -9`` of the process; only a power
    loss or OS crash can lose the last commits. Several processes may share the file (WAL readers never
    block; a writer waits up to ``timeout`` seconds for the lock).

    Runs of `Agent`/`DeepAgent` on one thread of the file are serialised across processes (``run_locks``: a
    lock file ``<path>-runlock``): a run waits up to ``run_lock_timeout`` seconds for another process's run
    on the same thread, then fails with `ThreadBusyError` before it starts.

    Build it with `sqlite_saver`. Close it with ``close()`` or use it as a context manager.
    """

    run_locks: RunLocks | None
    """The cross-process run lock of each thread (``None`` for ``:memory:``)."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0, run_lock_timeout: float = 60.0) -> None:
        """Open (or create) the database at ``path``; see `sqlite_saver`."""
        target = _check_path(path)
        lock_timeout = check_lock_timeout(run_lock_timeout, owner="sqlite_saver")
        conn = sqlite3.connect(target, check_same_thread=False, timeout=timeout)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            super().__init__(conn)
            self.setup()
        except sqlite3.DatabaseError as error:
            conn.close()
            raise UserError(
                f"sqlite_saver could not open {target!r} as a SQLite database ({error}). "
                "Pass a new file path or an existing checkpoint database."
            ) from error
        self.path = target
        self.run_locks = file_run_locks(target, timeout=lock_timeout)

    def close(self) -> None:
        """Close the database connection. The saver cannot be used afterwards."""
        self.conn.close()

    def __repr__(self) -> str:
        return f"SqliteCheckpointSaver(path={self.path!r})"


def sqlite_saver(path: str | os.PathLike[str], *, run_lock_timeout: float = 60.0) -> SqliteCheckpointSaver:
    """Open (or create) a SQLite checkpoint saver, the embedded durable default.

    Parent folders are created; ``":memory:"`` gives a private in-memory database. The returned saver
    works for sync (``invoke``/``stream``) and async (``ainvoke``/``astream``) runs alike; see
    `SqliteCheckpointSaver` for how.

    Durability: run graphs with ``durability="sync"`` when a crash must not lose a step. Then every
    step's checkpoint is committed before the next step starts, and after a ``kill -9`` a new process
    resumes with ``graph.invoke(None, config)`` exactly at the interrupted step (a tool that was running
    runs again; finished model calls are not repeated). With LangGraph's default ``"async"`` the last
    step can be lost and is re-run; with ``"exit"`` nothing is saved until the run ends.

    Example:
        ```python
        from langchain.agents import create_agent

        from ai_utils.memory import sqlite_saver

        with sqlite_saver("data/checkpoints.sqlite") as saver:
            agent = create_agent(model=llm, tools=tools, checkpointer=saver)
            config = {"configurable": {"thread_id": "user-42"}}
            agent.invoke({"messages": [("user", "Ich heisse Max")]}, config, durability="sync")
        ```

    Several processes (``uvicorn --workers 2``) may run agents on one file: runs on the same thread are
    serialised across them (a lock file ``<path>-runlock`` next to the database), so no turn is lost.

    Args:
        path: the database file, or ``":memory:"``.
        run_lock_timeout: how long an `Agent`/`DeepAgent` run waits for another process's run on the same
            thread before it fails with `ThreadBusyError` (nothing ran). For conversations that several
            processes serve at once, durable sessions (`sqlite_sessions`) queue turns instead.

    Returns:
        The open saver.

    Raises:
        UserError: ``path`` is not a path, is a folder, or the file is not a SQLite database; a bad
            ``run_lock_timeout``.
    """
    return SqliteCheckpointSaver(path, run_lock_timeout=run_lock_timeout)
