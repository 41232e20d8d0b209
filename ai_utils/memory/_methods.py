"""Sync/async twins written once: one rule (or one body) makes several methods.

A LangGraph saver has a sync and an async method for every operation, and so do our sessions. Our
wrappers treat many of them alike, so instead of spelling each one out:

- `offloaded(BaseCheckpointSaver.put)` is ``aput``: the sync method, run by ``self._run_sync`` (a worker
  thread, see `ThreadedAsyncSaver`); `offloaded_iter` does the same for ``list`` -> ``alist``;
- `delegated(BaseCheckpointSaver.get_tuple)` hands the call to the wrapped saver ``self._inner``;
  in both, the template is LangGraph's own method, so the made method keeps its name, signature and types;
- `twins(body)` makes a sync function (or method) and its async twin from ONE generator ``body`` that
  yields the `Step` s it needs (each names its sync and its async call) and gets their results back: the
  logic between the calls, and its error handling, exists once (a sans-IO core, like ``jev/_protocol.py``);
  `iterate` / `aiterate` run a body that also yields items (an iterator and its async twin).

A step's ``Exception`` is raised inside the body at its ``yield`` (so ``try``/``except`` there works as in
straight code); a ``BaseException`` (cancellation, ``KeyboardInterrupt``) propagates at once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeAlias, TypeVar, cast

__all__ = ["Flow", "Step", "aiterate", "delegated", "iterate", "named", "offloaded", "offloaded_iter", "twins"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def named(method: Callable[..., Any], template: Callable[..., Any], name: str, doc: str | None) -> None:
    """Give a made ``method`` the ``name`` and ``doc`` it stands for, and ``template``'s signature.

    A `twins` body's return annotation ``Flow[X]`` becomes ``X``, what the made method returns.
    """
    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    signature = inspect.signature(template)
    returns = signature.return_annotation
    if isinstance(returns, str) and returns.startswith("Flow[") and returns.endswith("]"):
        signature = signature.replace(return_annotation=returns[len("Flow[") : -1])
    method.__signature__ = signature  # type: ignore[attr-defined]


def offloaded(template: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """The async twin of the sync method ``template`` names, run by ``self._run_sync``."""
    name = template.__name__

    async def twin(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast("R", await self._run_sync(functools.partial(getattr(self, name), *args, **kwargs)))

    named(twin, template, f"a{name}", f"Async twin of ``{name}`` (runs in a worker thread).")
    return twin


def offloaded_iter(
    template: Callable[Concatenate[Any, P], Iterator[T]],
) -> Callable[Concatenate[Any, P], AsyncIterator[T]]:
    """The async twin of the sync iterator method ``template`` names: all items are read by ``self._run_sync``."""
    name = template.__name__

    async def twin(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        method = getattr(self, name)
        for item in await self._run_sync(lambda: [*method(*args, **kwargs)]):
            yield item

    named(
        twin,
        template,
        f"a{name}",
        f"Async twin of ``{name}``: all matching items are read in a worker thread, then yielded.\n\n"
        "Pass ``limit`` when a thread may hold very many checkpoints.",
    )
    return twin


def delegated(template: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """The method ``template`` names, handed to the wrapped saver ``self._inner`` (sync, async or async iterator)."""
    name = template.__name__
    method: Callable[..., Any]
    if inspect.isasyncgenfunction(template):

        async def method(self: Any, /, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async for item in getattr(self._inner, name)(*args, **kwargs):
                yield item

    elif inspect.iscoroutinefunction(template):

        async def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            return await getattr(self._inner, name)(*args, **kwargs)

    else:

        def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._inner, name)(*args, **kwargs)

    named(method, template, name, "Delegate to ``inner``.")
    return cast("Callable[Concatenate[Any, P], R]", method)


@dataclass(slots=True)
class Step(Generic[T]):
    """One call a `twins` body needs: its sync form and its async form, with the arguments for both."""

    sync: Callable[..., T]
    asynchronous: Callable[..., Awaitable[T]]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None

    @classmethod
    def of(cls, saver: Any, name: str, *args: Any, **kwargs: Any) -> Step[Any]:
        """The saver's method ``name`` and its async twin ``a<name>``."""
        return cls(getattr(saver, name), getattr(saver, f"a{name}"), args, kwargs)

    def call(self) -> _Outcome:
        try:
            return _Outcome(self.sync(*self.args, **(self.kwargs or {})), None)
        except Exception as error:
            return _Outcome(None, error)

    async def acall(self) -> _Outcome:
        try:
            return _Outcome(await self.asynchronous(*self.args, **(self.kwargs or {})), None)
        except Exception as error:
            return _Outcome(None, error)


Flow: TypeAlias = Generator[Step[Any], Any, R]
"""A `twins` body: yields steps, receives each step's result (or its exception, raised at the ``yield``)."""


@dataclass(slots=True)
class _Outcome:
    value: Any
    error: Exception | None


@dataclass(slots=True)
class _Done:
    value: Any


def _resume(flow: Generator[Any, Any, Any], outcome: _Outcome) -> Any:
    try:
        return flow.throw(outcome.error) if outcome.error is not None else flow.send(outcome.value)
    except StopIteration as stop:
        return _Done(stop.value)


def twins(
    body: Callable[P, Flow[R]], name: str, async_doc: str | None = None
) -> tuple[Callable[P, R], Callable[P, Coroutine[Any, Any, R]]]:
    """The sync function (or method) ``name`` and its async twin ``a<name>``, both running ``body``.

    The sync one gets ``body``'s docstring, the async one ``async_doc`` (default: "Async twin of ...").
    """

    def sync(*args: P.args, **kwargs: P.kwargs) -> R:
        flow = body(*args, **kwargs)
        state = _resume(flow, _Outcome(None, None))
        while isinstance(state, Step):
            state = _resume(flow, state.call())
        return cast("R", state.value)

    async def asynchronous(*args: P.args, **kwargs: P.kwargs) -> R:
        flow = body(*args, **kwargs)
        state = _resume(flow, _Outcome(None, None))
        while isinstance(state, Step):
            state = _resume(flow, await state.acall())
        return cast("R", state.value)

    named(sync, body, name, body.__doc__)
    named(asynchronous, body, f"a{name}", async_doc or f"Async twin of `{name}`.")
    return sync, asynchronous


def iterate(flow: Generator[T | Step[Any], Any, None]) -> Iterator[T]:
    """Run a body that yields items AND steps: the items come out, the steps are called (sync)."""
    outcome = _Outcome(None, None)
    while not isinstance(state := _resume(flow, outcome), _Done):
        if isinstance(state, Step):
            outcome = state.call()
        else:
            outcome = _Outcome(None, None)
            yield state


async def aiterate(flow: Generator[T | Step[Any], Any, None]) -> AsyncIterator[T]:
    """Async twin of `iterate`: the steps are awaited."""
    outcome = _Outcome(None, None)
    while not isinstance(state := _resume(flow, outcome), _Done):
        if isinstance(state, Step):
            outcome = await state.acall()
        else:
            outcome = _Outcome(None, None)
            yield state
