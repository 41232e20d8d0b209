"""One run at a time per (checkpointer, thread) in this process.

Two runs on one thread at once both read the same checkpoint and the later write wins: messages are lost
silently. `GraphRunner` therefore holds `thread_lock(saver, thread_id)` for the whole run. The lock is
shared by sync runs (threads) and async runs (any event loop), and waiters are served in arrival order.
Across processes this lock does nothing: durable sessions (SPEC §14) serialise turns with a lease.

Hand-written because neither `threading.Lock` (blocks an event loop) nor `asyncio.Lock` (bound to one
loop, not usable from a thread) covers both kinds of caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import Any

__all__ = ["RunLock", "thread_lock"]


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

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """``with lock.hold():`` for sync runs."""
        self.acquire()
        try:
            yield
        finally:
            self.release()

    @contextlib.asynccontextmanager
    async def ahold(self) -> AsyncIterator[None]:
        """``async with lock.ahold():`` for async runs."""
        await self.aacquire()
        try:
            yield
        finally:
            self.release()


_LOCKS: weakref.WeakValueDictionary[tuple[int, str], RunLock] = weakref.WeakValueDictionary()
_LOCKS_MUTEX = threading.Lock()


def thread_lock(saver: Any, thread_id: str) -> RunLock:
    """The process-wide lock of one thread in one checkpointer (alive while someone holds or waits on it)."""
    key = (id(saver), thread_id)
    with _LOCKS_MUTEX:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = RunLock()
            _LOCKS[key] = lock
        return lock
