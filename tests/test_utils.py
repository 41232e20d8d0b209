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


def test_worker_loop_runs_callbacks_from_its_own_thread_without_a_wake_up_write() -> None:
    from ai_utils._utils import WorkerLoop

    loop = WorkerLoop()
    ran: list[str] = []

    async def main() -> None:
        # What LangGraph's astream does for every chunk, from the loop's own thread.
        loop.call_soon_threadsafe(ran.append, "own thread")
        with pytest.raises(BlockingIOError):  # nothing was written to the loop's wake-up socket
            loop._ssock.recv(1)  # type: ignore[attr-defined]
        await asyncio.sleep(0)

    try:
        loop.run_until_complete(main())
        assert ran == ["own thread"]  # and it ran on the next turn of the loop
    finally:
        loop.close()


def test_worker_loop_is_woken_at_once_by_another_thread() -> None:
    from ai_utils._utils import WorkerLoop

    loop = WorkerLoop()
    woken = threading.Event()

    async def main() -> float:
        future = loop.create_future()
        threading.Timer(0.05, loop.call_soon_threadsafe, args=(future.set_result, None)).start()
        start = loop.time()
        await asyncio.wait_for(future, 30)  # the loop sleeps in select() until the other thread writes
        woken.set()
        return loop.time() - start

    try:
        thread_result: list[float] = []
        worker = threading.Thread(target=lambda: thread_result.append(loop.run_until_complete(main())))
        worker.start()
        worker.join(10)
        assert woken.is_set() and thread_result[0] < 5
    finally:
        loop.close()
