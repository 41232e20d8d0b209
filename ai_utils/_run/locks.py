"""One run at a time per (checkpointer, thread): in this process, and across processes where the saver can.

Two runs on one thread at once both read the same checkpoint and the later write wins: messages are lost
silently. `GraphRunner` therefore holds the thread for the whole run (`hold_thread` / `ahold_thread`): first
`thread_lock(saver, thread_id)`, shared by sync runs (threads) and async runs (any event loop), waiters served
in arrival order; then, when the saver is shared by processes (``sqlite_saver``, ``postgres_saver``: their
``run_locks``, see ``ai_utils.memory._runlock``), the thread's cross-process lock, waited for up to the saver's
``run_lock_timeout``; past it the run fails with `ThreadBusyError` before it starts. Durable sessions (SPEC §14)
serialise turns with a lease instead, and queue them.

`RunLock` is hand-written because neither `threading.Lock` (blocks an event loop) nor `asyncio.Lock` (bound to
one loop, not usable from a thread) covers both kinds of caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

from ai_utils.exceptions import ThreadBusyError

__all__ = ["ProcessLocks", "RunLock", "ahold_thread", "hold_thread", "thread_lock"]


class ProcessLocks(Protocol):
    """A saver's locks shared by processes (``saver.run_locks``; ``ai_utils.memory._runlock.RunLocks``)."""

    key: str
    timeout: float

    def acquire(self, thread_id: str) -> bool:
        """Wait up to ``timeout`` for the thread's lock; ``False`` when another process kept it."""
        ...

    async def aacquire(self, thread_id: str) -> bool:
        """Async twin of `acquire`."""
        ...

    def unlock(self, thread_id: str) -> None:
        """Release the thread's lock."""
        ...

    async def aunlock(self, thread_id: str) -> None:
        """Async twin of `unlock`."""
        ...


class RunLock:
    """A FIFO lock that threads (`hold`) and coroutines on any loop (`ahold`) can share."""

    __slots__ = ("__weakref__", "_held", "_mutex", "_waiters")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        self._waiters: deque[threading.Event | tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    def acquire(self) -> None:
        """Block this thread until the lock is ours."""
        with self._mutex:
            if not self._held:
                self._held = True
                return
            event = threading.Event()
            self._waiters.append(event)
        event.wait()  # `release` handed the lock to us

    async def aacquire(self) -> None:
        """Wait (without blocking the loop) until the lock is ours."""
        loop = asyncio.get_running_loop()
        with self._mutex:
            if not self._held:
                self._held = True
                return
            future: asyncio.Future[None] = loop.create_future()
            waiter = (loop, future)
            self._waiters.append(waiter)
        try:
            await future
        except asyncio.CancelledError:
            with self._mutex:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                    raise
            if future.done() and not future.cancelled():
                self.release()  # handed to us just as we were cancelled: pass it on
            raise  # else `_hand` sees the cancelled future and passes it on

    def release(self) -> None:
        """Give the lock to the next waiter, or free it."""
        with self._mutex:
            while self._waiters:
                waiter = self._waiters.popleft()
                if isinstance(waiter, threading.Event):
                    waiter.set()
                    return
                loop, future = waiter
                try:
                    loop.call_soon_threadsafe(self._hand, future)
                except RuntimeError:  # that loop is closed: its waiter is gone
                    continue
                return
            self._held = False

    def _hand(self, future: asyncio.Future[None]) -> None:
        if future.done():
            self.release()
        else:
            future.set_result(None)

    def hold(self) -> RunLock:
        """``with lock.hold():`` for sync runs (the lock itself; no generator per run)."""
        return self

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def ahold(self) -> RunLock:
        """``async with lock.ahold():`` for async runs (the lock itself; no generator per run)."""
        return self

    async def __aenter__(self) -> None:
        await self.aacquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


_LOCKS: weakref.WeakValueDictionary[tuple[int | str, str], RunLock] = weakref.WeakValueDictionary()
_LOCKS_MUTEX = threading.Lock()


def process_locks(saver: Any) -> ProcessLocks | None:
    """The saver's cross-process run locks (``None`` for a saver private to this process)."""
    return getattr(saver, "run_locks", None)


def thread_lock(saver: Any, thread_id: str, *, shared: ProcessLocks | None = None) -> RunLock:
    """The process-wide lock of one thread in one checkpointer (alive while someone holds or waits on it).

    With ``shared`` (the saver's cross-process locks), savers on one store (two ``sqlite_saver`` objects on
    one file) share it: the key is the store's.
    """
    key = (shared.key if shared is not None else id(saver), thread_id)
    with _LOCKS_MUTEX:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = RunLock()
            _LOCKS[key] = lock
        return lock


def _busy(thread_id: str, shared: ProcessLocks, started: float) -> ThreadBusyError:
    waited = time.monotonic() - started
    return ThreadBusyError(
        f"Thread {thread_id!r} is busy: another process has been running a turn on it for longer than "
        f"{shared.timeout:g}s (the saver's `run_lock_timeout`); nothing of this call ran. Retry later, or serve "
        "conversations that several processes share with durable sessions (`Agent(sessions=sqlite_sessions(...))` "
        "or `postgres_sessions(...)`), which queue each conversation's turns across processes.",
        thread_id=thread_id,
        waited=waited,
    )


def hold_thread(saver: Any, thread_id: str, *, across_processes: bool = True) -> contextlib.AbstractContextManager[Any]:
    """Hold the thread for a sync run: this process's lock, then the saver's cross-process one (if any).

    ``across_processes=False`` (durable sessions, which serialise turns with a lease and may take a session
    over from a process that still runs): this process's lock only.

    Raises:
        ThreadBusyError: another process kept the thread past the saver's ``run_lock_timeout``.
    """
    shared = process_locks(saver) if across_processes else None
    if shared is None:  # this process's lock alone: the lock itself, no generator per run
        return thread_lock(saver, thread_id).hold()
    return _hold_shared(saver, thread_id, shared)


@contextlib.contextmanager
def _hold_shared(saver: Any, thread_id: str, shared: ProcessLocks) -> Iterator[None]:
    with thread_lock(saver, thread_id, shared=shared).hold():
        started = time.monotonic()
        if not shared.acquire(thread_id):
            raise _busy(thread_id, shared, started)
        try:
            yield
        finally:
            shared.unlock(thread_id)


def ahold_thread(
    saver: Any, thread_id: str, *, across_processes: bool = True
) -> contextlib.AbstractAsyncContextManager[Any]:
    """Async twin of `hold_thread`."""
    shared = process_locks(saver) if across_processes else None
    if shared is None:  # this process's lock alone: the lock itself, no generator per run
        return thread_lock(saver, thread_id).ahold()
    return _ahold_shared(saver, thread_id, shared)


@contextlib.asynccontextmanager
async def _ahold_shared(saver: Any, thread_id: str, shared: ProcessLocks) -> AsyncIterator[None]:
    async with thread_lock(saver, thread_id, shared=shared).ahold():
        started = time.monotonic()
        if not await shared.aacquire(thread_id):
            raise _busy(thread_id, shared, started)
        try:
            yield
        finally:
            await shared.aunlock(thread_id)
