"""This worker's runner: one background event loop per store that runs the sessions it has work for.

Turns finish on their own (SPEC §14): a turn is never tied to the caller's iteration, so it runs on a loop
of its own (a daemon thread) whether it was prompted from sync code (``prompt``) or async code
(``aprompt``). Per session, one *driver* task claims the lease, runs every open turn in order (a crashed
one first), turns left-over steers into the next turn, and gives the lease back. Another worker's lease is
waited for by polling (bounded interval); its expiry is the takeover.

`Signal` wakes readers of this process (sync or async, any loop) the moment a line is stored; readers in
other processes poll the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ai_utils.exceptions import SessionFencedError

__all__ = ["Engine", "Signal"]

logger = logging.getLogger("ai_utils.sessions")
T = TypeVar("T")


class Signal:
    """Per-session version counters that sync and async waiters (on any loop) can wait on."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._versions: dict[str, int] = {}
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}

    def version(self, session_id: str) -> int:
        """The current version of a session (bumped on every publish)."""
        with self._cond:
            return self._versions.get(session_id, 0)

    def publish(self, session_id: str) -> None:
        """Wake everyone waiting on ``session_id``."""
        with self._cond:
            self._versions[session_id] = self._versions.get(session_id, 0) + 1
            self._cond.notify_all()
            waiters = self._waiters.pop(session_id, [])
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop closed
                loop.call_soon_threadsafe(_wake, future)

    def wait(self, session_id: str, seen: int, timeout: float) -> None:
        """Block until the version differs from ``seen`` or ``timeout`` passes."""
        with self._cond:
            self._cond.wait_for(lambda: self._versions.get(session_id, 0) != seen, timeout)

    async def await_version(self, session_id: str, seen: int, timeout: float) -> None:
        """Async twin of `wait`."""
        loop = asyncio.get_running_loop()
        with self._cond:
            if self._versions.get(session_id, 0) != seen:
                return
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.setdefault(session_id, []).append((loop, future))
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            with self._cond:
                waiting = self._waiters.get(session_id, [])
                if (loop, future) in waiting:
                    waiting.remove((loop, future))


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Engine:
    """The background loop, the drivers and the in-process registry of agents and contexts of one store."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.signal = Signal()
        self.agents: dict[str, Any] = {}
        self.contexts: dict[str, Any] = {}  # turn id or session id -> context of this process (never stored)
        self._drivers: dict[str, asyncio.Task[None]] = {}
        self._kicks: dict[str, int] = {}
        self._running: dict[str, asyncio.Task[Any]] = {}
        self._cancelled: set[str] = set()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="ai_utils-sessions", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def close(self) -> None:
        """Stop the loop (running turns stop as in a crash: the next worker continues them)."""
        if not self.loop.is_running():
            return

        async def stop() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_asyncgens()
            from ai_utils._loop_resources import aclose_loop_resources

            await aclose_loop_resources()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Any:
        """Run ``coro`` on the engine loop; a `concurrent.futures.Future`."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def register(self, agent: Any, name: str) -> None:
        """The agent that runs the sessions named ``name`` in this worker."""
        self.agents[name] = agent

    # --- drivers -----------------------------------------------------------------------------------------

    def kick(self, session_id: str) -> None:
        """Make sure a driver works on ``session_id`` (thread-safe)."""
        self.loop.call_soon_threadsafe(self._ensure, session_id)

    def _ensure(self, session_id: str) -> None:
        self._kicks[session_id] = self._kicks.get(session_id, 0) + 1
        if session_id not in self._drivers:
            self._drivers[session_id] = self.loop.create_task(self._drive(session_id))

    async def _drive(self, session_id: str) -> None:
        try:
            while True:
                self._kicks[session_id] = 0
                try:
                    await self._work(session_id)
                except SessionFencedError as error:
                    logger.warning("Stopped working on session %r: %s", session_id, error)
                except Exception:
                    logger.exception("Session %r: the worker failed; the next worker continues it", session_id)
                    return
                if not self._kicks.get(session_id):
                    return
        finally:
            self._drivers.pop(session_id, None)
            self._kicks.pop(session_id, None)

    async def _work(self, session_id: str) -> None:
        store = self.store
        delay = store.poll_seconds
        while True:
            if not store.busy(session_id):
                return
            token = store.claim(session_id)
            if token is not None:
                break
            await asyncio.sleep(delay)  # another worker runs it; its lease expiring is the takeover
            delay = min(delay * 1.5, 0.5)
        renewer = asyncio.create_task(self._renew(session_id, token))
        try:
            from ai_utils.sessions._turns import run_turn

            while True:
                turn = store.next_turn(session_id)
                if turn is None:
                    if store.steers_to_turn(session_id, token):
                        continue
                    return
                agent = self.agents.get(store.owner_of(session_id) or "")
                if agent is None:
                    logger.warning("Session %r: no agent of its name in this worker; leaving it queued", session_id)
                    return
                await run_turn(self, agent, session_id, token, turn)
        finally:
            renewer.cancel()
            with contextlib.suppress(Exception):
                store.release(session_id, token)
            self.signal.publish(session_id)

    async def _renew(self, session_id: str, token: int) -> None:
        store = self.store
        every = max(min(store.lease_seconds / 3, 1.0), 0.02)
        poll = min(0.2, every)
        waited = 0.0
        while True:
            await asyncio.sleep(poll)
            waited += poll
            running = self._running.get(session_id)
            seq = getattr(running, "turn_seq", None)
            if running is not None and seq is not None and store.cancel_seq(session_id) >= seq:
                self.cancel_local(session_id)  # cancelled from another worker
            if waited >= every:
                waited = 0.0
                if not store.renew(session_id, token):
                    logger.warning("Session %r: lease taken over by another worker; stopping", session_id)
                    if running is not None:
                        running.cancel()
                    return

    # --- the running turn --------------------------------------------------------------------------------

    def set_running(self, session_id: str, task: asyncio.Task[Any] | None) -> None:
        """Record (or clear) the task running the session's turn in this worker."""
        if task is None:
            self._running.pop(session_id, None)
            self._cancelled.discard(session_id)
        else:
            self._running[session_id] = task

    def was_cancelled(self, session_id: str) -> bool:
        """Whether the running turn was cancelled by ``session.cancel()`` (not by a shutdown)."""
        return session_id in self._cancelled

    def cancel_local(self, session_id: str) -> None:
        """Cancel the session's running turn if this worker runs it (call on the engine loop)."""
        task = self._running.get(session_id)
        if task is not None and not task.done():
            self._cancelled.add(session_id)
            task.cancel()

    def cancel(self, session_id: str) -> None:
        """Thread-safe `cancel_local`."""
        self.loop.call_soon_threadsafe(self.cancel_local, session_id)

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the engine loop soon."""
        self.loop.call_soon_threadsafe(fn, *args)
