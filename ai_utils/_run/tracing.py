"""THE tracing slot of the run path: spans for our own runs come from its hooks, not from LangChain callbacks.

Once any inheritable callback handler is configured, LangChain and LangGraph run their callback machinery for
every runnable of a run (~400 callback-manager calls per zero-latency turn, where a span handler needs ~35):
about +17% per turn (``benchmarks/bench_agent.py``). So a run of `Agent` / `DeepAgent` (durable session turns
too: they run through `GraphRunner`) traces itself at the three places that matter:

- the run (`start_run` / `end_run`, in `GraphRunner`'s shells): ``invoke_agent <name>``;
- each model call (`call_model` / `acall_model`, around the handler of the model-call hook the stack has anyway:
  `ModelCallRepair`, `ToolLoop`): ``chat <model>``;
- each tool call (`call_tool` / `acall_tool`, in the tool loop's tool-call hook): ``execute_tool <tool>``.

The spans themselves are made by a `RunTracer` (``ai_utils.otel._spans``, the room below that imports
OpenTelemetry): `install` sets the one of ``instrument()``, a wrapper's ``tracer_provider=`` gives it its own.
This module imports no OpenTelemetry and costs a ``ContextVar`` read per hook when nothing traces.

While a run traces itself, its `Frame` is the context's `active` value, and ``instrument()``'s LangChain
configure hook hands out no handler (so no callback machinery and no duplicate spans). Inside a tool call the
value is a `Zone` instead: what the tool itself runs (a plain chain, a gateway call, a deepagents subagent,
compiled subagents) is LangChain's business, so the tracer's callback handler is attached there again and hangs
those spans under the ``execute_tool`` span. A run of ours started inside a tool gets a `Frame` of its own.
Runs outside our wrappers (chains, `Chain`, loops' agent steps, user runnables) see no frame and keep the
callback handler. The value is set in the run's own context and put back when it ends; a stream sets it only
while it makes its next chunk (`steps`, `asteps`), so the consumer's code between chunks never sees it.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

__all__ = [
    "Frame",
    "RunTracer",
    "Zone",
    "acall_model",
    "acall_tool",
    "active",
    "asteps",
    "call_model",
    "call_tool",
    "end_run",
    "install",
    "installed",
    "paused",
    "start_run",
    "steps",
    "traces_itself",
]

_R = TypeVar("_R")


class RunTracer(Protocol):
    """What makes the spans (``ai_utils.otel._spans.SpanTracer``); its methods never raise."""

    handler: Any
    """The LangChain callback handler that traces what a tool call runs (same provider, same settings)."""

    def start_agent(self, name: str, conversation: str | None, parent: Any) -> Any:
        """The run's ``invoke_agent`` span under ``parent`` (a span; ``None``: the ambient context)."""
        ...

    def start_chat(self, request: Any, conversation: str | None, parent: Any) -> Any:
        """A model call's ``chat`` span (``request``: the `ModelRequest`)."""
        ...

    def end_chat(self, span: Any, response: Any) -> None:
        """End a ``chat`` span with what the model answered (usage, model, finish reasons)."""
        ...

    def start_tool(self, request: Any, conversation: str | None, parent: Any) -> Any:
        """A tool call's ``execute_tool`` span (``request``: the `ToolCallRequest`)."""
        ...

    def end_tool(self, span: Any, result: Any) -> None:
        """End an ``execute_tool`` span with the tool's result (a failed ``ToolMessage`` is an error)."""
        ...

    def paused(self, span: Any, interrupts: Sequence[Any]) -> None:
        """An ``interrupt`` event (ids only) on a run's span."""
        ...

    def end(self, span: Any, error: BaseException | None = None) -> None:
        """End a span: error status and ``error.type`` for ``error`` (an interrupt is an event, not an error)."""
        ...


class Frame:
    """One of our runs that traces itself: its tracer, its ``invoke_agent`` span, its conversation."""

    __slots__ = ("conversation", "previous", "span", "tracer")

    def __init__(self, tracer: RunTracer, span: Any, conversation: str | None, previous: Frame | Zone | None) -> None:
        self.tracer = tracer
        self.span = span
        self.conversation = conversation
        self.previous = previous


class Zone:
    """A traced tool call's own work: LangChain runs in it are traced by ``tracer.handler`` under ``span``."""

    __slots__ = ("call_id", "handler", "span", "tracer")

    def __init__(self, tracer: RunTracer, span: Any, call_id: Any) -> None:
        self.tracer = tracer
        self.handler = tracer.handler
        self.span = span
        self.call_id = call_id


_ACTIVE: contextvars.ContextVar[Frame | Zone | None] = contextvars.ContextVar("ai_utils_tracing", default=None)
_INSTALLED: list[RunTracer | None] = [None]


def active() -> Frame | Zone | None:
    """The frame of the run tracing itself here, the zone of a traced tool call, or ``None``."""
    return _ACTIVE.get()


def install(tracer: RunTracer | None) -> None:
    """The tracer of every wrapper run without a ``tracer_provider`` of its own (``instrument()``; ``None``: off)."""
    _INSTALLED[0] = tracer


def installed() -> RunTracer | None:
    """The tracer `install` set, or ``None``."""
    return _INSTALLED[0]


def traces_itself(handler: Any) -> bool:
    """Whether the run here traces itself with ``handler``'s tracer (the handler then stays out of it)."""
    frame = _ACTIVE.get()
    return type(frame) is Frame and frame.tracer.handler is handler


# --- the run ------------------------------------------------------------------------------------------------


def start_run(tracer: RunTracer | None, name: str, config: Mapping[str, Any]) -> Frame | None:
    """Open the run's ``invoke_agent`` span and make it the context's frame (``None`` when nothing traces)."""
    if tracer is None:
        tracer = _INSTALLED[0]
        if tracer is None:
            return None
    previous = _ACTIVE.get()
    thread_id = (config.get("configurable") or {}).get("thread_id")
    conversation = None if thread_id is None else str(thread_id)
    span = tracer.start_agent(name, conversation, previous.span if previous is not None else None)
    frame = Frame(tracer, span, conversation, previous)
    _ACTIVE.set(frame)
    return frame


def end_run(frame: Frame | None, error: BaseException | None = None) -> None:
    """End the run's span and put the context's previous value back (a stream may end in another task)."""
    if frame is None:
        return
    _ACTIVE.set(frame.previous)
    frame.tracer.end(frame.span, error)


def steps(frame: Frame | None, chunks: Iterator[_R]) -> Iterator[_R]:
    """``chunks``, with ``frame`` the context's value only while the next chunk is made (not in the consumer's code)."""
    if frame is None:
        return chunks
    return _steps(frame, chunks)


def _steps(frame: Frame, chunks: Iterator[_R]) -> Iterator[_R]:
    try:
        while True:
            _ACTIVE.set(frame)
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            finally:
                _ACTIVE.set(frame.previous)
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:  # closing the stream closes the run now, as ``yield from`` would
            _ACTIVE.set(frame)
            try:
                close()
            finally:
                _ACTIVE.set(frame.previous)


def asteps(frame: Frame | None, chunks: AsyncIterator[_R]) -> AsyncIterator[_R]:
    """Async twin of `steps` (the consumer may even take each chunk in another task)."""
    if frame is None:
        return chunks
    return _asteps(frame, chunks)


async def _asteps(frame: Frame, chunks: AsyncIterator[_R]) -> AsyncIterator[_R]:
    while True:
        _ACTIVE.set(frame)
        try:
            chunk = await anext(chunks)
        except StopAsyncIteration:
            return
        finally:
            _ACTIVE.set(frame.previous)
        yield chunk


def paused(frame: Frame | None, interrupts: Sequence[Any]) -> None:
    """The run paused on ``interrupts``: an event on its span."""
    if frame is not None and interrupts:
        frame.tracer.paused(frame.span, interrupts)


# --- model calls --------------------------------------------------------------------------------------------
# The sync and async wrappers below differ only by ``await``: a shared context manager would cost a generator per
# model and tool call on the path this module exists to keep cheap, so they stay written out twice.


def call_model(handler: Callable[[Any], _R], request: Any) -> _R:
    """``handler(request)`` in a ``chat`` span when the run traces itself."""
    frame = _ACTIVE.get()
    if type(frame) is not Frame:
        return handler(request)
    tracer = frame.tracer
    span = tracer.start_chat(request, frame.conversation, frame.span)
    try:
        response = handler(request)
    except BaseException as error:
        tracer.end(span, error)
        raise
    tracer.end_chat(span, response)
    return response


def acall_model(handler: Callable[[Any], Awaitable[_R]], request: Any) -> Awaitable[_R]:
    """Async twin of `call_model` (untraced: the handler's own awaitable, no extra coroutine)."""
    frame = _ACTIVE.get()
    if type(frame) is not Frame:
        return handler(request)
    return _acall_model(frame, handler, request)


async def _acall_model(frame: Frame, handler: Callable[[Any], Awaitable[_R]], request: Any) -> _R:
    tracer = frame.tracer
    span = tracer.start_chat(request, frame.conversation, frame.span)
    try:
        response = await handler(request)
    except BaseException as error:
        tracer.end(span, error)
        raise
    tracer.end_chat(span, response)
    return response


# --- tool calls ---------------------------------------------------------------------------------------------


def _call_id(request: Any) -> Any:
    call = getattr(request, "tool_call", None)
    return call.get("id") if isinstance(call, Mapping) else None


def call_tool(handler: Callable[[Any], _R], request: Any) -> _R:
    """``handler(request)`` in an ``execute_tool`` span when the run traces itself; the tool's work in its `Zone`."""
    frame = _ACTIVE.get()
    if type(frame) is not Frame:
        return handler(request)
    tracer = frame.tracer
    span = tracer.start_tool(request, frame.conversation, frame.span)
    token = _ACTIVE.set(Zone(tracer, span, _call_id(request)))
    try:
        result = handler(request)
    except BaseException as error:
        tracer.end(span, error)
        raise
    finally:
        _ACTIVE.reset(token)
    tracer.end_tool(span, result)
    return result


def acall_tool(handler: Callable[[Any], Awaitable[_R]], request: Any) -> Awaitable[_R]:
    """Async twin of `call_tool` (untraced: the handler's own awaitable, no extra coroutine)."""
    frame = _ACTIVE.get()
    if type(frame) is not Frame:
        return handler(request)
    return _acall_tool(frame, handler, request)


async def _acall_tool(frame: Frame, handler: Callable[[Any], Awaitable[_R]], request: Any) -> _R:
    tracer = frame.tracer
    span = tracer.start_tool(request, frame.conversation, frame.span)
    token = _ACTIVE.set(Zone(tracer, span, _call_id(request)))
    try:
        result = await handler(request)
    except BaseException as error:
        tracer.end(span, error)
        raise
    finally:
        _ACTIVE.reset(token)
    tracer.end_tool(span, result)
    return result
