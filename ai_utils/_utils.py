"""Small helpers shared by every room of the house."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ai_utils.exceptions import UserError

__all__ = ["is_async_callable", "run_sync"]

T = TypeVar("T")


def is_async_callable(obj: Any) -> bool:
    """Tell whether calling ``obj`` returns an awaitable (functions, partials, callable objects)."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    return inspect.iscoroutinefunction(obj) or (callable(obj) and inspect.iscoroutinefunction(obj.__call__))


def run_sync(make_coro: Callable[[], Coroutine[Any, Any, T]] | Coroutine[Any, Any, T], *, what: str = "this call") -> T:
    """Run async-only code from a sync entry point.

    Refuses inside a running event loop, where blocking would deadlock it.

    Args:
        make_coro: a coroutine, or a zero-argument function returning one.
        what: the name of the sync entry point, used in the error message.

    Returns:
        The coroutine's result.

    Raises:
        UserError: when called from inside a running event loop (Jupyter, FastAPI, an async test).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        if inspect.iscoroutine(make_coro):
            make_coro.close()
        raise UserError(
            f"{what} cannot run inside a running event loop (Jupyter, FastAPI, async code). "
            "Use the async twin instead, e.g. `await ainvoke(...)` / `async for ... in astream(...)`."
        )
    coro = make_coro() if callable(make_coro) else make_coro
    runner = asyncio.Runner()
    try:
        return runner.run(coro)
    finally:
        runner.close()
