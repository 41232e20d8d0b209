"""Small helpers shared by every room of the house."""

from __future__ import annotations

import asyncio
import functools
import inspect
import queue
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from ai_utils._loop_resources import aclose_loop_resources
from ai_utils.exceptions import UserError

__all__ = ["WorkerLoop", "is_async_callable", "iterate_sync", "run_sync"]

T = TypeVar("T")


def is_async_callable(obj: Any) -> bool:
    """Tell whether calling ``obj`` returns an awaitable (functions, partials, callable objects)."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    return inspect.iscoroutinefunction(obj) or (callable(obj) and inspect.iscoroutinefunction(obj.__call__))


class WorkerLoop(asyncio.SelectorEventLoop):
    """The event loop of a private worker thread (the sessions' runner, `iterate_sync`).

    ``call_soon_threadsafe`` from the loop's own thread does not write the loop's wake-up socket: the callback is
    already queued and the loop looks at its queue before it waits again. LangGraph's ``astream`` hands every
    chunk (each streamed token) to its consumer through ``call_soon_threadsafe``, so each one cost a ``send`` and
    later a ``recv`` system call, and on a worker whose I/O threads contend for the GIL each system call hands the
    GIL away (a profile of durable turns on Postgres showed them as the runner thread's costliest calls). Only for
    loops in threads that are not the main thread: there a Python signal handler may call
    ``call_soon_threadsafe`` while the loop waits, and that needs the wake-up.
    """

    def _write_to_self(self) -> None:
        if self._thread_id == threading.get_ident():  # type: ignore[attr-defined]
            return
        super()._write_to_self()  # type: ignore[misc]


def _loop_is_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _in_loop_error(what: str, twin: str) -> UserError:
    return UserError(
        f"{what} cannot run inside a running event loop (Jupyter, FastAPI, async code). "
        f"Use the async twin instead, e.g. {twin}."
    )


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
    if _loop_is_running():
        if inspect.iscoroutine(make_coro):
            make_coro.close()
        raise _in_loop_error(what, "`await ainvoke(...)`")
    coro = make_coro() if callable(make_coro) else make_coro
    runner = asyncio.Runner()
    try:
        return runner.run(coro)
    finally:
        runner.run(aclose_loop_resources())
        runner.close()


def iterate_sync(make_agen: Callable[[], AsyncIterator[T]], *, what: str = "this call") -> Iterator[T]:
    """Drive an async iterator from sync code, item by item, on a private event loop in a worker thread.

    Items reach the caller as they are produced. Stopping early (``break``, ``close()``, an exception in
    the consumer) cancels the async side and waits for its cleanup, so resources it holds (MCP sessions)
    are released before this returns.

    Raises:
        UserError: when called from inside a running event loop.
    """
    if _loop_is_running():
        raise _in_loop_error(what, "`async for chunk in astream(...)`")
    items: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    box: dict[str, Any] = {}  # touched only on the worker's loop: the running task, or a cancel-before-start flag

    async def pump() -> None:
        if box.get("cancelled"):
            return
        box["task"] = asyncio.current_task()
        agen = make_agen()
        try:
            async for item in agen:
                items.put(("item", item))
        except asyncio.CancelledError:
            pass  # the consumer stopped early; nobody is waiting for items any more
        except BaseException as error:  # handed to the consumer thread, which re-raises it
            items.put(("error", error))
        else:
            items.put(("done", None))
        finally:
            closer = getattr(agen, "aclose", None)
            if closer is not None:
                await closer()
            await aclose_loop_resources()

    def cancel() -> None:
        task = box.get("task")
        if task is None:
            box["cancelled"] = True
        else:
            task.cancel()

    loop = WorkerLoop()
    worker = threading.Thread(target=loop.run_until_complete, args=(pump(),), name="ai_utils-iterate_sync", daemon=True)
    worker.start()
    try:
        while True:
            kind, value = items.get()
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        if worker.is_alive():
            loop.call_soon_threadsafe(cancel)
        worker.join()  # returns once the async side has cleaned up (closed MCP sessions, ...)
        loop.close()
