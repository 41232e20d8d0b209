"""The one place that touches ``langchain``'s private API (``langchain.agents.factory``).

- `untraced_hooks`: while a graph is built inside it (in this context only), `create_agent` hands the graph
  each middleware's ``wrap_*``/``awrap_*`` hook as it is instead of wrapped in langsmith's ``traceable``.
  ``create_agent`` looks ``traceable`` up in its module at build time and wraps every hook with it; with
  LangSmith tracing off that wrapper still sets up a run, copies the context and reads the function's
  signature on every call (about 40 µs a model call on a zero-latency turn, ``benchmarks/bench_agent.py``).
  `GraphRunner` builds its fast graph inside this block and the graph of LangSmith-traced runs outside it
  (``_run/hooks.py``), so traced runs keep their hook spans. The module's ``traceable`` is replaced once by a
  function that calls the real one unless the current context is building inside the block: other code
  building graphs at the same time (another thread, another task) gets langsmith's wrapper as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["untraced_hooks"]

_UNTRACED: contextvars.ContextVar[bool] = contextvars.ContextVar("ai_utils_untraced_hooks", default=False)
_INSTALL_LOCK = threading.Lock()


def _as_is(func: Callable[..., Any]) -> Callable[..., Any]:
    return func


_real_traceable: Callable[..., Any] | None = None


def _traceable(*args: Any, **kwargs: Any) -> Any:
    # create_agent calls ``traceable(name=..., process_inputs=..., process_outputs=...)(hook)``.
    if not args and _UNTRACED.get():
        return _as_is
    assert _real_traceable is not None  # set by _install before this replaces factory.traceable
    return _real_traceable(*args, **kwargs)


def _install() -> None:
    global _real_traceable
    factory: Any = importlib.import_module("langchain.agents.factory")
    if factory.traceable is _traceable:
        return
    with _INSTALL_LOCK:
        if factory.traceable is not _traceable:
            _real_traceable = factory.traceable
            factory.traceable = _traceable


@contextlib.contextmanager
def untraced_hooks() -> Iterator[None]:
    """Inside the block (this context only), `create_agent` does not wrap middleware hooks in ``traceable``."""
    _install()
    token = _UNTRACED.set(True)
    try:
        yield
    finally:
        _UNTRACED.reset(token)
