"""The LangChain `Runnable` face the wrappers share (`Agent`, `DeepAgent`, `Chain`, `JevToolCaller`, `LoopRunner`).

Each wrapper subclasses `WrapperRunnable` and keeps its own ``invoke``/``ainvoke`` (and ``stream``/``astream``)
with the signature ``(input, config=None, **options)``: a `Runnable` composition (``prompt | agent``,
``with_retry``, ``with_fallbacks``, ``with_config``, ``bind``) passes ``config`` positionally and the options
as keywords. LangChain's `Runnable` then gives ``batch``/``abatch``, ``astream_events``, ``transform`` and the
``|`` operator over those methods. What this base adds:

- ``InputType``/``OutputType``: LangChain reads them from the generic arguments of ``Runnable[In, Out]``, which a
  wrapper that is generic in its answer type (``Agent[OutputT]``) does not spell out, so each wrapper names them
  (``input_schema``/``output_schema`` are built from them).
- `warn_sync_in_loop`: a sync run (``invoke``, ``stream``, ``batch``) inside a running event loop blocks the
  loop for the whole run; one `RuntimeWarning` names the async twin. ``batch`` warns once for the batch (its
  runs happen in worker threads, or for one input on this thread, where the warning is silenced). A notebook
  cell is the exception: a Jupyter kernel runs every cell on its event loop, and a sync call there is the
  notebook's normal way to work, not a blocked server. A composition that calls the wrapper again for the same
  call (``with_retry``'s attempts, ``with_fallbacks``' next runnable) does not warn again: the warning is keyed
  on the enclosing LangChain run.

Not a pydantic model (`RunnableSerializable`): a wrapper holds chat models, savers and callables that do not
serialise, and a pydantic ``__init__`` would replace the wrappers' checked constructors.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, Generic, Literal, cast, overload

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from typing_extensions import TypeVar

__all__ = ["WrapperRunnable", "warn_sync_in_loop"]

OutputT = TypeVar("OutputT", covariant=True, default=Any)

# Set while a sync batch runs, so its runs (worker threads copy the context) do not warn again.
_WARNED: contextvars.ContextVar[bool] = contextvars.ContextVar("ai_utils_sync_in_loop_warned", default=False)

# The enclosing LangChain runs that warned already (bounded, oldest dropped first): one warning per sync call even
# when a composition runs the wrapper several times for it (retry attempts, fallbacks).
_WARNED_RUNS: dict[Any, None] = {}
_WARNED_RUNS_LOCK = threading.Lock()
_MAX_WARNED_RUNS = 256

_TWINS = {"invoke": "ainvoke", "stream": "astream", "batch": "abatch", "batch_as_completed": "abatch_as_completed"}


def warn_sync_in_loop(owner: str, method: str, *, stacklevel: int = 3) -> None:
    """Warn (`RuntimeWarning`) when the sync ``owner.method`` is called on a thread that runs an event loop."""
    # `_get_running_loop` (in asyncio's __all__) answers None off-loop; `get_running_loop` raises and we would catch
    # a RuntimeError on every sync call, the shell's largest cost.
    if asyncio._get_running_loop() is None or _WARNED.get() or _in_notebook_cell() or _warned_in_this_run():
        return
    twin = _TWINS.get(method, f"a{method}")
    warnings.warn(
        f"{owner}.{method}() was called inside a running event loop: it blocks the loop (every other task waits) "
        f"until the run ends. Use `await {owner}.{twin}(...)` instead"
        + (" (or `async for` over it)." if twin == "astream" else "."),
        RuntimeWarning,
        stacklevel=stacklevel,
    )


def _warned_in_this_run() -> bool:
    """Whether the LangChain run this call is part of (a retry, fallbacks, a pipe) warned already; marks it."""
    # LangChain sets this context variable to the config it passes down while a runnable's body runs; its callback
    # manager's parent is that runnable's run, the same for every attempt of a retry and every fallback.
    config = var_child_runnable_config.get()
    parent = getattr(config.get("callbacks"), "parent_run_id", None) if config else None
    if parent is None:
        return False
    with _WARNED_RUNS_LOCK:
        if parent in _WARNED_RUNS:
            return True
        _WARNED_RUNS[parent] = None
        if len(_WARNED_RUNS) > _MAX_WARNED_RUNS:
            del _WARNED_RUNS[next(iter(_WARNED_RUNS))]
    return False


def _in_notebook_cell() -> bool:
    """Whether this is a cell of an IPython kernel (Jupyter) running on the kernel's main thread."""
    ipython = sys.modules.get("IPython")
    if ipython is None or threading.current_thread() is not threading.main_thread():
        return False
    return getattr(ipython, "get_ipython", lambda: None)() is not None


class WrapperRunnable(Runnable[Any, OutputT], Generic[OutputT]):
    """`Runnable` over a wrapper's own run methods; see the module docstring."""

    name: str | None = None

    def _input_type(self) -> Any:
        return Any

    def _output_type(self) -> Any:
        return Any

    @property
    def InputType(self) -> type[Any]:
        """The input this wrapper takes (for ``input_schema``)."""
        return cast("type[Any]", self._input_type())

    @property
    def OutputType(self) -> type[OutputT]:
        """What ``invoke`` answers (for ``output_schema``)."""
        return cast("type[OutputT]", self._output_type())

    def batch(
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[OutputT]:
        """Run ``invoke`` on each input, in parallel threads (``config["max_concurrency"]`` bounds them).

        Options (``thread_id``, ``context``, ...) apply to every input; per-input settings go in a list of
        configs. With ``return_exceptions=True`` a failed input gives its exception in place of an answer.
        """
        warn_sync_in_loop(type(self).__name__, "batch")
        token = _WARNED.set(True)
        try:
            return super().batch(inputs, config, return_exceptions=return_exceptions, **kwargs)
        finally:
            _WARNED.reset(token)

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any | None) -> Iterator[OutputT]:
        """``invoke``'s answer as a stream (`Runnable`'s default; a wrapper that streams chunks overrides this).

        Inside a running event loop the warning names ``astream``, the twin of what was called, not ``ainvoke``.
        """
        return self._stream_once(super().stream(input, config, **kwargs))

    def _stream_once(self, answers: Iterator[OutputT]) -> Iterator[OutputT]:
        # Warns where the run happens (the first ``next()``: a worker thread is fine), then runs every step in
        # one context where the inner ``invoke``'s warning is silenced (a generator may resume anywhere).
        warn_sync_in_loop(type(self).__name__, "stream")
        context = contextvars.copy_context()
        context.run(_WARNED.set, True)
        while True:
            try:
                yield context.run(next, answers)
            except StopIteration:
                return

    @overload
    def batch_as_completed(
        self,
        inputs: Sequence[Any],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: Literal[False] = False,
        **kwargs: Any,
    ) -> Iterator[tuple[int, OutputT]]: ...

    @overload
    def batch_as_completed(
        self,
        inputs: Sequence[Any],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: Literal[True],
        **kwargs: Any,
    ) -> Iterator[tuple[int, OutputT | Exception]]: ...

    def batch_as_completed(
        self,
        inputs: Sequence[Any],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> Iterator[tuple[int, OutputT | Exception]]:
        """`batch`, yielding ``(index, answer)`` pairs as the runs finish."""
        warn_sync_in_loop(type(self).__name__, "batch_as_completed")
        return self._as_completed(inputs, config, return_exceptions, kwargs)

    def _as_completed(
        self,
        inputs: Sequence[Any],
        config: RunnableConfig | Sequence[RunnableConfig] | None,
        return_exceptions: bool,
        kwargs: dict[str, Any],
    ) -> Iterator[tuple[int, OutputT | Exception]]:
        # Each step runs in one context where the warning is silenced (a generator may resume anywhere).
        context = contextvars.copy_context()
        context.run(_WARNED.set, True)
        parent: Any = super()  # one call for both of Runnable's return_exceptions overloads
        results = parent.batch_as_completed(inputs, config, return_exceptions=return_exceptions, **kwargs)
        while True:
            try:
                yield context.run(next, results)
            except StopIteration:
                return
