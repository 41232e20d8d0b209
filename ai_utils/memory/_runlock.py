"""Run locks shared by processes: one run at a time per thread of a SQLite file or Postgres database.

Two processes running turns on one thread (``uvicorn --workers 2``, two tabs of one conversation) both read the
same checkpoint and the later write wins: user messages vanish with no error. The run path (``_run/locks.py``)
therefore holds, for the whole run, the thread's in-process lock and then the saver's `RunLocks` lock; the
savers `sqlite_saver` and `postgres_saver` build give theirs as ``saver.run_locks`` (a user's plain
``InMemorySaver`` is private to its process and has none).

A waiter polls (``try_lock``) until ``timeout``: long enough for one turn of the other process, short enough to
fail with a clear error before the run starts when the thread stays busy (`ai_utils.ThreadBusyError`).

SQLite: POSIX byte-range locks (``fcntl.lockf``) on a sidecar file ``<database>-runlock``, one byte per thread
(at a hash of the thread id). The kernel drops a dead process's locks, so a crash never leaves a stale owner
(a lock row in the database would need owner ids, liveness checks and leases) and nothing is written to the
database itself. POSIX locks belong to the process and are dropped when any of its descriptors of the file
closes, so each process keeps one descriptor per file, shared by its savers, and counts its holders per byte.
Where ``fcntl`` is missing (Windows) a SQLite saver has no cross-process lock.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections import Counter
from typing import Any

from ai_utils.exceptions import UserError

__all__ = ["FileRunLocks", "RunLocks", "check_lock_timeout", "file_run_locks", "thread_key"]

_FIRST_POLL = 0.002
_MAX_POLL = 0.05


def thread_key(thread_id: str, *, signed: bool = False) -> int:
    """A stable 31-bit (or signed 32-bit) number for ``thread_id``: which lock slot it takes."""
    digest = hashlib.blake2b(thread_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True) if signed else int.from_bytes(digest, "big") & 0x7FFFFFFF


def check_lock_timeout(value: Any, *, owner: str) -> float:
    """``run_lock_timeout`` as a float of seconds (>= 0), else `UserError`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise UserError(f"{owner}(run_lock_timeout=...) must be a number of seconds >= 0, got {value!r}.")
    return float(value)


class RunLocks:
    """One lock per thread id, shared by every process on the same store; waits are polled up to ``timeout``.

    A subclass implements `try_lock` and `unlock` (each returns at once) and sets ``key`` (the store's identity:
    savers with the same key share one in-process lock per thread) and ``timeout``.
    """

    key: str
    timeout: float

    def try_lock(self, thread_id: str) -> bool:
        """Take the thread's lock if no other process holds it; ``False`` if one does."""
        raise NotImplementedError

    def unlock(self, thread_id: str) -> None:
        """Release the thread's lock."""
        raise NotImplementedError

    def acquire(self, thread_id: str) -> bool:
        """Wait (blocking this thread) up to ``timeout`` seconds for the lock; ``False`` when it stayed busy."""
        deadline = time.monotonic() + self.timeout
        pause = _FIRST_POLL
        while not self.try_lock(thread_id):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))
            pause = min(pause * 2, _MAX_POLL)
        return True

    async def aacquire(self, thread_id: str) -> bool:
        """Async twin of `acquire` (the event loop runs on while it waits)."""
        deadline = time.monotonic() + self.timeout
        pause = _FIRST_POLL
        while not await self._atry_lock(thread_id):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, _MAX_POLL)
        return True

    async def _atry_lock(self, thread_id: str) -> bool:
        return self.try_lock(thread_id)

    async def aunlock(self, thread_id: str) -> None:
        """Async twin of `unlock`."""
        self.unlock(thread_id)

    def close(self) -> None:
        """Release what the locks hold open (nothing here)."""


class _LockFile:
    """A process's one descriptor of a lock file, and how many of its runs hold each byte."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.mutex = threading.Lock()
        self.holders: Counter[int] = Counter()
        self._fd: int | None = None

    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        return self._fd


_FILES: dict[str, _LockFile] = {}
_FILES_MUTEX = threading.Lock()


def _lock_file(path: str) -> _LockFile:
    with _FILES_MUTEX:
        file = _FILES.get(path)
        if file is None:
            file = _FILES[path] = _LockFile(path)
        return file


class FileRunLocks(RunLocks):
    """Run locks of one SQLite database file: byte-range locks on ``<database>-runlock`` (see the module)."""

    def __init__(self, database: str, *, timeout: float) -> None:
        real = os.path.realpath(database)
        self.key = f"sqlite:{real}"
        self.timeout = timeout
        self._file = _lock_file(f"{real}-runlock")

    def try_lock(self, thread_id: str) -> bool:
        import fcntl

        slot = thread_key(thread_id)
        file = self._file
        with file.mutex:
            if file.holders[slot]:
                # This process holds the byte already: for another thread id with the same hash (the in-process
                # lock keeps one run per thread id), so it is not a conflict.
                file.holders[slot] += 1
                return True
            try:
                fcntl.lockf(file.fd(), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
            except OSError:  # EAGAIN / EACCES: another process holds it
                return False
            file.holders[slot] = 1
            return True

    def unlock(self, thread_id: str) -> None:
        import fcntl

        slot = thread_key(thread_id)
        file = self._file
        with file.mutex:
            file.holders[slot] -= 1
            if file.holders[slot] <= 0:
                del file.holders[slot]
                fcntl.lockf(file.fd(), fcntl.LOCK_UN, 1, slot)


def file_run_locks(database: str, *, timeout: float) -> FileRunLocks | None:
    """`FileRunLocks` for a database file, or ``None`` where they cannot work (``:memory:``, no ``fcntl``)."""
    if database == ":memory:":
        return None
    try:
        import fcntl  # noqa: F401
    except ImportError:  # pragma: no cover - Windows
        return None
    return FileRunLocks(database, timeout=timeout)
