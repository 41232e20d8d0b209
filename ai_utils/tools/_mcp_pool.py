"""The pool of idle MCP sessions that outlive a run (`MCPServer.session`), one pool per event loop.

A run borrows an idle session of its server (`take`) and gives it back when it ends (`give`); a session is
either idle here or held by exactly one run, so two concurrent runs never share one. Sessions belong to the
event loop that opened them, so each loop has its own pool: it is closed when ai_utils ends that loop
(`ai_utils._loop_resources`), when the app's loop closes its resources, and at process exit.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import weakref
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from ai_utils._loop_resources import on_loop_close

__all__ = ["POOL_SIZE", "Pool", "PooledSession", "loop_pool"]

logger = logging.getLogger(__name__)

# Idle sessions kept per server config; more concurrent runs open more, and the extra ones close on return.
POOL_SIZE = 8
# Seconds the exit hook waits for a loop's pool to close.
_EXIT_TIMEOUT = 10.0


class PooledSession(Protocol):
    """What the pool needs of a session holder."""

    @property
    def closed(self) -> bool: ...

    async def aclose(self) -> None: ...


S = TypeVar("S", bound=PooledSession)


class Pool(Generic[S]):
    """Idle sessions of one event loop, keyed by everything that makes two servers' sessions differ."""

    def __init__(self) -> None:
        self._idle: dict[Hashable, list[S]] = {}

    def take(self, key: Hashable) -> S | None:
        """An idle, still open session for ``key``, now owned by the caller; ``None`` when there is none."""
        idle = self._idle.get(key)
        while idle:
            session = idle.pop()  # the most recently used: the likeliest to be warm
            if not session.closed:
                return session
        return None

    def give(self, key: Hashable, session: S) -> bool:
        """Keep ``session`` for a later run of ``key``; ``False`` (the caller closes it) when the pool is full."""
        idle = self._idle.setdefault(key, [])
        if session.closed or len(idle) >= POOL_SIZE:
            return False
        idle.append(session)
        return True

    async def aclose(self) -> None:
        """Close every idle session; a later run of this loop starts a new pool."""
        loop = asyncio.get_running_loop()
        if _pools.get(loop) is self:
            del _pools[loop]
        sessions = [session for idle in self._idle.values() for session in idle]
        self._idle.clear()
        for session in sessions:
            await session.aclose()


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pool[PooledSession]] = weakref.WeakKeyDictionary()


def loop_pool() -> Pool[PooledSession]:
    """The running loop's pool, created (and registered to close with the loop) on first use."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = Pool()
        on_loop_close(pool.aclose)
    return pool


@atexit.register
def _close_at_exit() -> None:
    # Loops still open at exit (an app that never closed its loop, a loop in a daemon thread) close their pools
    # here, so servers are told their sessions ended; a closed loop cancelled its sessions' tasks already.
    for loop, pool in list(_pools.items()):
        if loop.is_closed():
            continue
        try:
            if loop.is_running():
                asyncio.run_coroutine_threadsafe(pool.aclose(), loop).result(_EXIT_TIMEOUT)
            else:
                loop.run_until_complete(asyncio.wait_for(pool.aclose(), _EXIT_TIMEOUT))
        except Exception as exc:  # exit goes on; the server expires the sessions on its own
            logger.warning("Closing pooled MCP sessions at exit failed: %r", exc)
