"""run_sync / iterate_sync: drive async-only code from sync entry points, and refuse inside a loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from ai_utils import UserError
from ai_utils._utils import is_async_callable, iterate_sync, run_sync


async def _double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


def test_run_sync_runs_a_coroutine_or_a_factory() -> None:
    assert run_sync(_double(2)) == 4
    assert run_sync(lambda: _double(3)) == 6


async def test_run_sync_refuses_inside_a_running_loop_and_closes_the_coroutine() -> None:
    coro = _double(1)
    with pytest.raises(UserError, match="running event loop"):
        run_sync(coro, what="Thing.invoke")
    assert coro.cr_frame is None  # closed: no "never awaited" warning


def test_iterate_sync_yields_items_while_the_producer_is_still_running() -> None:
    gate = threading.Event()

    async def producer() -> AsyncIterator[int]:
        yield 1
        while not gate.is_set():  # waits for the consumer to have seen item 1
            await asyncio.sleep(0.001)
        yield 2

    items = iterate_sync(producer)
    assert next(items) == 1
    gate.set()
    assert list(items) == [2]


def test_iterate_sync_raises_the_producers_error() -> None:
    async def producer() -> AsyncIterator[int]:
        yield 1
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        list(iterate_sync(producer))


def test_iterate_sync_stopping_early_cancels_and_cleans_up_the_producer() -> None:
    cleaned = threading.Event()

    async def producer() -> AsyncIterator[int]:
        try:
            yield 1
            await asyncio.sleep(60)  # a long await that must be cancelled, not waited for
            yield 2
        finally:
            await asyncio.sleep(0)
            cleaned.set()

    items = iterate_sync(producer)
    assert next(items) == 1
    items.close()  # type: ignore[attr-defined]
    assert cleaned.is_set()


async def test_iterate_sync_refuses_inside_a_running_loop() -> None:
    async def producer() -> AsyncIterator[int]:
        yield 1

    with pytest.raises(UserError, match="astream"):
        next(iterate_sync(producer))


def test_is_async_callable_sees_through_partials_and_callable_objects() -> None:
    import functools

    class Call:
        async def __call__(self) -> None:
            return None

    assert is_async_callable(_double) and is_async_callable(functools.partial(_double, 1))
    assert is_async_callable(Call()) and not is_async_callable(len)
