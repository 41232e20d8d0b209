"""Sync and async twins over one body: code that yields its I/O as a `Twin`, run by `drive` or `adrive`.

A body is a generator that yields ``(sync_thunk, async_thunk)`` pairs and receives each one's result; an
exception from a thunk is thrown back into it at that point. `drive` calls the sync thunks, `adrive` awaits
the async ones, so the logic between the I/O is written once for ``invoke`` and ``ainvoke``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeAlias, TypeVar

__all__ = ["Twin", "adrive", "drive"]

T = TypeVar("T")
Twin: TypeAlias = "tuple[Callable[[], Any], Callable[[], Awaitable[Any]]]"


def drive(steps: Generator[Twin, Any, T]) -> T:
    """Run a node's generator with sync I/O (an I/O error is thrown back into it)."""
    try:
        twin = next(steps)
        while True:
            try:
                result = twin[0]()
            except Exception as error:  # handed to the generator, which re-raises what it cannot handle
                twin = steps.throw(error)
            else:
                twin = steps.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(steps: Generator[Twin, Any, T]) -> T:
    """`drive` with async I/O."""
    try:
        twin = next(steps)
        while True:
            try:
                result = await twin[1]()
            except Exception as error:  # as in `drive`
                twin = steps.throw(error)
            else:
                twin = steps.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
