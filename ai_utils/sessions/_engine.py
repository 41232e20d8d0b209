"""This worker's runner: one background event loop per store that runs the sessions it has work for.

Turns finish on their own (SPEC §14): a turn is never tied to the caller's iteration, so it runs on a loop
of its own (a daemon thread) whether it was prompted from sync code (``prompt``) or async code
(``aprompt``). Per session, one *driver* task claims the lease, runs every open turn in order (a crashed
one first), turns left-over steers into the next turn, and gives the lease back. Another worker's lease is
waited for (woken when it is given back: at once in this process and, on Postgres, by ``NOTIFY``; else a
bounded poll); its expiry, or its holder dying on this host, is the takeover. The lease is renewed every
``lease_seconds / 3``.

`Signal` wakes readers of this process (sync or async, any loop) the moment a line is stored; readers in
other processes are woken by the store's listener (Postgres ``LISTEN``) or poll it (SQLite, <= 50 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ai_utils._utils import WorkerLoop
from ai_utils.exceptions import SessionFencedError

__all__ = ["Engine", "Signal", "control", "steered", "turn_ends"]

logger = logging.getLogger("ai_utils.sessions")
_MAX_VERSIONS = 10_000
T = TypeVar("T")


class Recent(OrderedDict[str, Any]):
    """A dict that keeps only its ``limit`` most recently set keys (a server sees unboundedly many sessions)."""

    def __init__(self, limit: int = 10_000) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


_CONTROL = "\x00control"
_ENDS = "\x00ends"
_STEERS = "\x00steers"


def control(session_id: str) -> str:
    """The `Signal` key of a session's control events (a cancel, an interrupting prompt, a lease given back)."""
    return session_id + _CONTROL


def steered(session_id: str) -> str:
    """The `Signal` key published when a steer of the session is stored (here, or by another process on Postgres)."""
    return session_id + _STEERS


def turn_ends(session_id: str) -> str:
    """The `Signal` key published when a turn of the session ends (what ``turn.result()`` waits for).

    Published by this worker's turn runner after storing a turn's end, and (on Postgres) by the listener with every
    stored line of another process; a waiter whose turn runs elsewhere on SQLite polls, as readers do.
    """
    return session_id + _ENDS


class Signal:
    """Per-session version counters that sync and async waiters (on any loop) can wait on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.control = threading.Event()  # set on every control publish (the keeper waits on it)
        self._controlled: set[str] | None = set()  # sessions with a control publish since the keeper looked
        self._versions: dict[str, int] = {}
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}
        # Sync waiters per key: a publish wakes only the threads waiting on its key (a busy worker publishes for
        # every stored line; waking every waiting thread each time costs a GIL hand-off per thread per line).
        self._sync: dict[str, list[threading.Event]] = {}
        self.epoch = 0  # bumped by `publish_all` (also for keys never published, which have no version yet)

    def version(self, session_id: str) -> int:
        """The current version of a session (bumped on every publish)."""
        with self._lock:
            return self._versions.get(session_id, 0)

    def publish(self, session_id: str) -> None:
        """Wake everyone waiting on ``session_id``."""
        with self._lock:
            if len(self._versions) > _MAX_VERSIONS:
                # Forget idle sessions; a waiter that still holds an old version just wakes once more.
                self._versions = {k: v for k, v in self._versions.items() if k in self._waiters or k in self._sync}
            self._versions[session_id] = self._versions.get(session_id, 0) + 1
            if session_id.endswith(_CONTROL):
                self._control(session_id)
                self.control.set()
            waiters = self._waiters.pop(session_id, [])
            threads = self._sync.pop(session_id, ())
        for event in threads:
            event.set()
        self._wake_all(waiters)

    def publish_all(self) -> None:
        """Wake every waiter (a lost connection may have dropped notifications: everyone looks again)."""
        with self._lock:
            for key in list(self._versions) + list(self._waiters):
                self._versions[key] = self._versions.get(key, 0) + 1
            self._controlled = None
            self.epoch += 1
            self.control.set()
            waiters = [w for ws in self._waiters.values() for w in ws]
            self._waiters.clear()
            threads = [e for es in self._sync.values() for e in es]
            self._sync.clear()
        for event in threads:
            event.set()
        self._wake_all(waiters)

    def _control(self, key: str) -> None:
        if self._controlled is not None:
            self._controlled.add(key[: -len(_CONTROL)])
            if len(self._controlled) > _MAX_VERSIONS:  # nobody looked for long: look at everything next time
                self._controlled = None

    def take_controlled(self) -> set[str] | None:
        """The sessions with a control publish since the last call (``None``: maybe any)."""
        with self._lock:
            taken, self._controlled = self._controlled, set()
        return taken

    @staticmethod
    def _wake_all(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]) -> None:
        for loop, future in waiters:
            if _on(loop):
                _wake(future)
                continue
            with contextlib.suppress(RuntimeError):  # that loop closed
                loop.call_soon_threadsafe(_wake, future)

    def wait(self, session_id: str, seen: int, timeout: float) -> None:
        """Block until the version differs from ``seen`` or ``timeout`` passes."""
        with self._lock:
            if self._versions.get(session_id, 0) != seen:
                return
            event = threading.Event()
            self._sync.setdefault(session_id, []).append(event)
        if not event.wait(timeout):
            with self._lock:
                waiting = self._sync.get(session_id, [])
                if event in waiting:
                    waiting.remove(event)
                    if not waiting:
                        del self._sync[session_id]

    async def await_version(self, session_id: str, seen: int, timeout: float) -> None:
        """Async twin of `wait`."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._versions.get(session_id, 0) != seen:
                return
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.setdefault(session_id, []).append((loop, future))
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            with self._lock:
                waiting = self._waiters.get(session_id, [])
                if (loop, future) in waiting:
                    waiting.remove((loop, future))
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # Python 3.11's wait_for returns the result when a cancel meets the wake-up: keep the cancel.
            raise asyncio.CancelledError


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Engine:
    """The drivers and the in-process registry of agents and contexts of one store.

    A driver runs on the loop that asked for it: the caller's loop for ``aprompt`` (a task there), the
    engine's own background loop (a daemon thread, started on first need) for ``prompt``.
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self.signal = Signal()
        self.agents: dict[str, Any] = {}
        # Turn id or session id -> context given in this process (never stored); turns drop theirs at the end.
        self.contexts: Recent = Recent()
        self._lock = threading.Lock()
        self._drivers: dict[str, asyncio.AbstractEventLoop] = {}
        self._kicks: dict[str, int] = {}
        self._running: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = {}
        self._cancelled: set[str] = set()
        self._owners: Recent = Recent()
        self._lost_leases: Recent = Recent()
        self._held: dict[str, int] = {}  # session -> lease token this worker holds
        self._keeper: threading.Thread | None = None
        self._keeping = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._root: asyncio.Task[Any] | None = None
        self._done: asyncio.Future[None] | None = None
        # Loops that run drivers: the SQLite saver runs inline there.
        self.loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The background loop for turns prompted from sync code (started on first use)."""
        with self._lock:
            if self._loop is None:
                self._loop = WorkerLoop()
                self.loops.add(self._loop)
                self._thread = threading.Thread(target=self._serve, name="ai_utils-sessions", daemon=True)
                self._thread.start()
            return self._loop

    def _serve(self) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        # Under a root task rather than ``run_forever``: anyio (the checkpointer's ``to_thread``) looks for the loop's
        # root task on every call and caches it once found; on a loop without one each call scans every task.
        self._done = self._loop.create_future()
        with contextlib.suppress(asyncio.CancelledError):
            self._loop.run_until_complete(self._idle(self._done))

    async def _idle(self, done: asyncio.Future[None]) -> None:
        """The background loop's root task: runs until `close` sets ``done``."""
        self._root = asyncio.current_task()
        await done

    def _finish(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def close(self, timeout: float = 30.0) -> None:
        """Stop working: start no new turn, let running ones finish (up to ``timeout`` s), stop the loop.

        A turn still running after ``timeout`` stops as in a crash: the next worker continues it.
        """
        deadline = time.monotonic() + timeout
        self.closing = True
        # `_held` too: a turn's model calls end before its end record and lease release, which must not be cut.
        while (self._running or self._held) and time.monotonic() < deadline:
            time.sleep(0.02)
        self._keeping = False
        self.signal.control.set()
        if self._keeper is not None:
            self._keeper.join(5)
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not loop.is_running():
            return

        async def stop() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and t is not self._root]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown_asyncgens()
            from ai_utils._loop_resources import aclose_loop_resources

            await aclose_loop_resources()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(self._finish)  # the root task ends: the loop stops
        thread.join(10)
        if not thread.is_alive():
            loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Any:
        """Run ``coro`` on the background loop; a `concurrent.futures.Future`."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def register(self, agent: Any, name: str) -> None:
        """The agent that runs the sessions named ``name`` in this worker."""
        self.agents[name] = agent

    # --- drivers -----------------------------------------------------------------------------------------

    def kick(self, session_id: str, *, owner: str | None = None, here: bool = False) -> None:
        """Make sure a driver works on ``session_id`` (``owner``: the agent name it belongs to, when known).

        With ``here`` (async callers) the driver is a task on the running loop; else it runs on the background
        loop, since sync code must never wait on a turn that its own loop would have to run.
        """
        if owner is not None:
            self._owners[session_id] = owner
        loop = asyncio.get_running_loop() if here else self.loop
        with self._lock:
            self._kicks[session_id] = self._kicks.get(session_id, 0) + 1
            if session_id in self._drivers:
                return  # its driver looks again before it stops
            self._drivers[session_id] = loop
            self.loops.add(loop)
        if _on(loop):
            self._start(session_id)
        else:
            loop.call_soon_threadsafe(self._start, session_id)

    def _events(self, session_id: str) -> Any:
        """The `Emitter` of the agent that owns the session (a no-op one when unknown)."""
        agent = self.agents.get(self._owners.get(session_id) or "")
        link = getattr(agent, "_sessions_link", None)
        return link.events if link is not None else _NO_EVENTS

    async def io(self, fn: Callable[..., T], *args: Any) -> T:
        """A store call from a driver: in a worker thread on Postgres, inline on SQLite.

        On Postgres one session's round trip must not stall the others on this loop; on SQLite the call takes
        microseconds and a thread hop would cost more.
        """
        if self.store.kind == "postgres":
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    def runs_here(self, session_id: str) -> bool:
        """Whether the session's driver runs on the loop running in this thread (a sync wait would deadlock it)."""
        with self._lock:
            loop = self._drivers.get(session_id)
        return loop is not None and _on(loop)

    def _start(self, session_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self._drive(session_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drive(self, session_id: str) -> None:
        try:
            while True:
                with self._lock:
                    self._kicks[session_id] = 0
                try:
                    await self._work(session_id)
                except SessionFencedError as error:
                    logger.warning("Stopped working on session %r: %s", session_id, error)
                except Exception:
                    logger.exception("Session %r: the worker failed; the next worker continues it", session_id)
                    return
                with self._lock:
                    if not self._kicks.get(session_id):
                        self._drivers.pop(session_id, None)
                        self._kicks.pop(session_id, None)
                        return
        except BaseException:
            with self._lock:
                self._drivers.pop(session_id, None)
                self._kicks.pop(session_id, None)
            raise

    async def _claim(self, session_id: str) -> tuple[int, str | None, Any, Any] | None:
        """Take the session's lease, waiting while another worker holds it; ``None`` once it has no work left.

        Another worker's lease is waited for: woken when it is given back (at once in this process and, on Postgres,
        by ``NOTIFY``; a listener that lost its connection wakes every waiter when it is back), or when it runs out,
        or when its holder is seen dead on this host (a local check, no query). A wake-up first asks whether any
        work is left: usually the worker that gave the lease back ran every queued turn. With the lease comes the turn
        to run now, read in the same transaction (``(turn,)``; ``None``: not read), and the session's steer version
        from before that read (`SessionStore.steer_version`).
        """
        store, io = self.store, self.io
        notified = store.kind == "postgres"
        delay = store.poll_seconds
        cap = min(max(store.lease_seconds / 3, 0.5), 5.0) if notified else 0.5
        key = control(session_id)
        woken = False
        while True:
            seen = self.signal.version(key)
            if woken and not await io(store.busy, session_id):
                return None
            version = store.steer_version(session_id)
            got = await io(store.claim_turn, session_id)
            if isinstance(got, tuple):
                return (*got, version)
            if not got.busy:
                return None
            while True:
                await self.signal.await_version(key, seen, delay)
                delay = min(delay * 1.5, cap)
                woken = self.signal.version(key) != seen
                if woken or not notified or time.time() >= got.until or got.holder is None:
                    break
                # A look at most a quarter second old will do: hundreds of waiters, a handful of holders.
                if got.holder.dead_here(seen_within=0.25):
                    break

    async def _work(self, session_id: str) -> None:
        store, io = self.store, self.io
        key = control(session_id)
        claimed = await self._claim(session_id)
        if claimed is None:
            return
        token, took_from, first, version = claimed
        if took_from is not None:
            logger.info("Session %r: its worker %s died on this host; continuing its turn now", session_id, took_from)
        events = self._events(session_id)
        events.emit("lease.acquired", session_id=session_id, token=token, from_dead_worker=took_from is not None)
        self._hold(session_id, token)
        released = False
        try:
            from ai_utils.sessions._turns import run_turn

            while not self.closing:
                if first is None:
                    version = store.steer_version(session_id)  # before the read: a steer stored after it bumps it
                turn = first[0] if first is not None else await io(store.next_turn, session_id)
                first = None
                if turn is None:
                    made = await io(store.steers_to_turn, session_id, token)
                    if made is not None:
                        self._steers_context(*made)
                        continue
                    return
                owner = self._owners.get(session_id) or await io(store.owner_of, session_id) or ""
                self._owners[session_id] = owner  # a session never changes its agent
                agent = self.agents.get(owner)
                if agent is None:
                    logger.warning("Session %r: no agent of its name in this worker; leaving it queued", session_id)
                    return
                # Known without a waiting steer at that version: its first model call need not look for one.
                quiet = version if turn.steers is False else None
                released, first, then_version = await run_turn(self, agent, session_id, token, turn, quiet)
                if released:
                    return  # the turn's end gave the lease back: nothing else was waiting
                if first is not None:  # the end read the next turn (same transaction)
                    version = then_version
        except SessionFencedError:
            self._lost(session_id, token)
            raise
        finally:
            with self._lock:
                self._held.pop(session_id, None)
            if not released:
                with contextlib.suppress(Exception):
                    await io(store.release, session_id, token)
            self.signal.publish(session_id)
            self.signal.publish(key)

    def _lost(self, session_id: str, token: int) -> None:
        """Emit ``lease.lost`` once per lease (the renewer and the refused write may both notice)."""
        if self._lost_leases.get(session_id) != token:
            self._lost_leases[session_id] = token
            self._events(session_id).emit("lease.lost", session_id=session_id, token=token)

    def _steers_context(self, turn_id: str, steer_ids: list[str]) -> None:
        """A turn made of left-over steers gets the context of the session object that sent the first one."""
        context = self.contexts.pop(f"steer:{steer_ids[0]}", None)
        for steer in steer_ids[1:]:
            self.contexts.pop(f"steer:{steer}", None)
        if context is not None:
            self.contexts[turn_id] = context

    # --- the keeper: one thread renews every lease of this worker and looks for cancels -------------------

    def _hold(self, session_id: str, token: int) -> None:
        with self._lock:
            self._held[session_id] = token
            if self._keeper is None:
                self._keeper = threading.Thread(target=self._keep, name="ai_utils-sessions-keeper", daemon=True)
                self._keeper.start()

    def _keep(self) -> None:
        """Renew this worker's leases, and cancel a running turn that another process cancelled.

        Every ``lease_seconds / 3`` one statement renews every lease this worker holds; every ``control_seconds``
        (at once when woken by a notification) one read finds cancels sent from other processes. A thread of
        its own, so a busy event loop never delays a renewal into a takeover.
        """
        store = self.store
        every = max(store.lease_seconds / 3, 0.02)
        renew_at = time.monotonic() + every
        look_at = time.monotonic() + store.control_seconds
        while self._keeping:
            self.signal.control.wait(min(store.control_seconds, every))
            self.signal.control.clear()
            with self._lock:
                held = dict(self._held)
                running = {sid: getattr(task, "turn_seq", None) for sid, (_, task) in self._running.items()}
            controlled = self.signal.take_controlled()
            if not held:
                renew_at = time.monotonic() + every
                continue
            # Cancels sent from other processes: at once for a session it runs that got a control notification,
            # else every control_seconds (a notification may be lost).
            try:
                if running and (
                    controlled is None or time.monotonic() >= look_at or not controlled.isdisjoint(running)
                ):
                    look_at = time.monotonic() + store.control_seconds
                    cancelled = store.cancel_seqs()
                    for session_id, seq in running.items():
                        if seq is not None and cancelled.get(session_id, 0) >= seq:
                            self.cancel(session_id)  # cancelled from another worker (s.cancel(), on_busy=...)
                if time.monotonic() >= renew_at:
                    renew_at = time.monotonic() + every
                    renewed = store.renew_all()
                    with self._lock:
                        # Still held: not given back meanwhile (a turn's end gives it back before its driver lets go).
                        still = {
                            sid: token
                            for sid, token in held.items()
                            if self._held.get(sid) == token and store.leases.get(sid) == token
                        }
                    for session_id, token in still.items():
                        if session_id not in renewed:
                            logger.warning("Session %r: lease taken over by another worker; stopping", session_id)
                            self._lost(session_id, token)
                            self._stop(session_id)
            except Exception:  # the store is unreachable: try again; the leases run out if it stays so
                logger.warning("Session worker could not renew its leases; retrying", exc_info=True)

    def _stop(self, session_id: str) -> None:
        """Stop the session's running turn in this worker (its lease is lost: not a user's cancel)."""
        with self._lock:
            running = self._running.get(session_id)
        if running is not None:
            loop, task = running
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)

    # --- the running turn --------------------------------------------------------------------------------

    def set_running(self, session_id: str, task: asyncio.Task[Any] | None) -> None:
        """Record (or clear) the task running the session's turn in this worker (on its loop)."""
        with self._lock:
            if task is None:
                self._running.pop(session_id, None)
                self._cancelled.discard(session_id)
            else:
                self._running[session_id] = (asyncio.get_running_loop(), task)

    def was_cancelled(self, session_id: str) -> bool:
        """Whether the running turn was cancelled by ``session.cancel()`` (not by a shutdown)."""
        return session_id in self._cancelled

    def cancel(self, session_id: str, *, before: int | None = None) -> None:
        """Cancel the session's running turn if this worker runs it (thread-safe, any loop).

        Args:
            session_id: the session.
            before: only a turn accepted before this sequence number (a prompt that interrupts cancels the turns
                ahead of it, never itself).
        """
        with self._lock:
            running = self._running.get(session_id)
            if running is None:
                return
            if before is not None and getattr(running[1], "turn_seq", before) >= before:
                return
            self._cancelled.add(session_id)
        loop, task = running
        if _on(loop):
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)


class _NoEvents:
    def emit(self, type: str, **fields: Any) -> None:
        pass


_NO_EVENTS = _NoEvents()


def _on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
