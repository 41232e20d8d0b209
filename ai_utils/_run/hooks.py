"""Async middleware hooks as plain methods that hand back a coroutine (one reason, written once here).

`create_agent` wraps every ``awrap_model_call``/``awrap_tool_call`` hook in langsmith's ``traceable``. For an
``async def`` hook that wrapper hops to a worker thread twice per call, even with tracing off (about 100 µs a
call on a zero-latency turn, ``benchmarks/bench_routing.py``); for a plain function it calls straight
through. So our async hooks are plain methods: they do their synchronous part at once and return one of
these coroutines, which `create_agent` awaits as it would the hook's own.

With LangSmith tracing on, such a hook's span would end before the work it awaits; `traced_hooks` builds the
graph of traced runs with ``async def`` twins instead (see below).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import types
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

_T = TypeVar("_T")

__all__ = ["awaited", "langsmith_tracing", "ready", "traced_hooks"]


async def awaited(pending: Awaitable[_T]) -> _T:
    """``pending``'s result, as a coroutine of its own."""
    return await pending


async def ready(value: _T) -> _T:
    """``value``, as a coroutine (a hook that answers without calling its handler)."""
    return value


# --- LangSmith tracing ---------------------------------------------------------------------------------------
#
# `traceable` decides at graph build time how to wrap a hook: a plain method is traced as a sync function, so
# with LangSmith tracing on its span ends when the method hands back its coroutine, before the model or tool
# call it awaits. So `GraphRunner` builds a second graph for traced runs (once, when a run is traced), with each
# such hook shadowed by an ``async def`` twin while `create_agent` wraps it: `traceable` then traces the
# awaited work, and untraced runs keep the fast graph.

_HOOKS = ("awrap_model_call", "awrap_tool_call")
_BUILD_LOCK = threading.RLock()


def langsmith_tracing(config: Mapping[str, Any]) -> bool:
    """Whether a run with ``config`` is traced by LangSmith (environment, ``tracing_context``, a tracer callback)."""
    checks = _tracing_checks()
    if checks.enabled() or checks.tracer_var.get() is not None:
        return True
    callbacks = config.get("callbacks")
    handlers = callbacks if isinstance(callbacks, list) else getattr(callbacks, "handlers", None) or ()
    return any(isinstance(handler, checks.tracer) for handler in handlers)


@functools.cache
def _tracing_checks() -> Any:
    # Imported once, on the first run (langsmith costs ~130 ms to import; `import ai_utils` stays light).
    from langchain_core.tracers.context import tracing_v2_callback_var
    from langchain_core.tracers.langchain import LangChainTracer
    from langsmith.utils import tracing_is_enabled

    return types.SimpleNamespace(enabled=tracing_is_enabled, tracer_var=tracing_v2_callback_var, tracer=LangChainTracer)


def _plain_hooks(middleware: Any) -> list[str]:
    """The async hooks of ``middleware`` written as plain methods handing back a coroutine."""
    from langchain.agents.middleware import AgentMiddleware

    names = []
    for name in _HOOKS:
        method = getattr(type(middleware), name, None)
        if method is None or method is getattr(AgentMiddleware, name) or inspect.iscoroutinefunction(method):
            continue
        if hasattr(middleware, "__dict__"):
            names.append(name)
    return names


def _async_twin(hook: Callable[..., Awaitable[_T]]) -> Callable[..., Awaitable[_T]]:
    async def twin(request: Any, handler: Any) -> _T:
        return await hook(request, handler)

    twin.__name__ = twin.__qualname__ = getattr(hook, "__name__", "hook")
    return twin


@contextlib.contextmanager
def traced_hooks(middleware: Iterable[Any]) -> Iterator[None]:
    """While a traced graph is built: plain async hooks of ``middleware`` appear as ``async def`` twins."""
    with _BUILD_LOCK:
        shadowed: list[tuple[Any, str]] = []
        try:
            for item in middleware:
                for name in _plain_hooks(item):
                    item.__dict__[name] = _async_twin(getattr(item, name))
                    shadowed.append((item, name))
            yield
        finally:
            for item, name in shadowed:
                item.__dict__.pop(name, None)
