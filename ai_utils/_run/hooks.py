"""Async middleware hooks as plain methods that hand back a coroutine (one reason, written once here).

`create_agent` wraps every ``awrap_model_call``/``awrap_tool_call`` hook in langsmith's ``traceable``. For an
``async def`` hook that wrapper hops to a worker thread twice per call, even with tracing off (about 100 µs a
call on a zero-latency turn, ``benchmarks/bench_routing.py``); for a plain function it calls straight
through. So our async hooks are plain methods: they do their synchronous part at once and return one of
these coroutines, which `create_agent` awaits as it would the hook's own.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

_T = TypeVar("_T")

__all__ = ["awaited", "ready"]


async def awaited(pending: Awaitable[_T]) -> _T:
    """``pending``'s result, as a coroutine of its own."""
    return await pending


async def ready(value: _T) -> _T:
    """``value``, as a coroutine (a hook that answers without calling its handler)."""
    return value
