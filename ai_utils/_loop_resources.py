"""Async resources bound to one event loop (pooled HTTP clients), closed when our own runners end the loop.

An async HTTP client keeps idle keep-alive connections that belong to the loop that opened them. In an
app with one long-lived loop (FastAPI, Jupyter) that pool is what keeps each model call from paying a new
TLS handshake. Loops that ai_utils itself starts and stops (`run_sync`, `iterate_sync`) close what was
registered on them before they end, so no connection outlives its loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable

__all__ = ["aclose_loop_resources", "on_loop_close"]

_closers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Callable[[], Awaitable[None]]]] = (
    weakref.WeakKeyDictionary()
)


def on_loop_close(aclose: Callable[[], Awaitable[None]]) -> None:
    """Register ``aclose`` to run when ai_utils closes the running loop (see `aclose_loop_resources`)."""
    _closers.setdefault(asyncio.get_running_loop(), []).append(aclose)


async def aclose_loop_resources() -> None:
    """Close everything registered on the running loop; called by our runners before their loop ends."""
    for aclose in _closers.pop(asyncio.get_running_loop(), []):
        await aclose()
