"""`SpanTracer`: the GenAI spans of our own runs, made from the run path's tracing slot (`ai_utils._run.tracing`).

Same spans, attributes and rules as `OpenTelemetryCallbackHandler` (``invoke_agent``, ``chat``, ``execute_tool``;
content only with ``capture_content``, through the handler's one gate, secrets redacted; the run's ``context``
and exception messages never), but from the hooks our runs pass anyway instead of LangChain callbacks, whose
machinery costs far more than the spans (see `ai_utils._run.tracing`). Each tracer has its companion handler
(same provider and settings), which traces what a tool call runs. A context is never attached: a parent is
passed with ``set_span_in_context``; a run's span without a parent takes the ambient context (the
application's request span). Every method logs a failure and returns: tracing never breaks a run.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from langchain.agents.middleware import ExtendedModelResponse, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp

from ai_utils._compat.langchain_core import ls_params
from ai_utils.otel import _attributes as attrs
from ai_utils.otel._handler import OpenTelemetryCallbackHandler, _interrupt_ids

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
except ImportError as _import_error:  # pragma: no cover - _handler raised first
    from ai_utils._optional import missing_extra

    raise missing_extra("opentelemetry-api", extra="otel", feature="OpenTelemetry tracing") from _import_error

__all__ = ["SpanTracer"]

logger = logging.getLogger(__name__)

_F = TypeVar("_F", bound=Callable[..., Any])


def _guarded(method: _F) -> _F:
    """Never let a tracing problem break the run: log it and go on."""

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception:
            logger.debug("OpenTelemetry span %s failed", method.__name__, exc_info=True)
            return None

    return guarded  # type: ignore[return-value]


def _failed(method: str) -> None:
    logger.debug("OpenTelemetry span %s failed", method, exc_info=True)


def _parent(span: Any) -> Any:
    return trace.set_span_in_context(span) if span is not None else None


def _chat_params(model: Any, settings: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The requested model's name and the ``chat`` span's start attributes (without the conversation)."""
    metadata = ls_params(model, settings) if isinstance(model, BaseChatModel) else {}
    # The model's own fields only when its LangSmith parameters do not name it (a failed getattr is slow).
    params = None if metadata.get("ls_model_name") else {k: getattr(model, k, None) for k in ("model", "model_name")}
    return attrs.chat_attributes(metadata, params)


# Per chat model instance (by id, checked with a weak reference): a copy of its fields when its ``chat`` attributes
# were computed, its model name and those attributes. LangChain's LangSmith parameters (``_get_ls_params``) cost
# about a tenth of what the two spans of a zero-latency turn cost; a model's fields rarely change between calls,
# and any change (a field set to another value) computes them again. An entry goes when its model is collected;
# the copy holds the field values, so a model that one of its own fields refers back to (a closure over it) lives
# until its entry is pushed out: at most `_CHAT_PARAMS_MAX` entries, the oldest goes first.
_CHAT_PARAMS: dict[int, tuple[weakref.ref[Any], dict[str, Any], str | None, dict[str, Any]]] = {}
_CHAT_PARAMS_MAX = 128


def _chat_start(model: Any, settings: Mapping[str, Any] | None) -> tuple[str | None, dict[str, Any]]:
    """`_chat_params` for ``model`` without per-call settings, remembered per model instance while its fields stay."""
    if settings:
        return _chat_params(model, settings)
    key = id(model)
    entry = _CHAT_PARAMS.get(key)
    if entry is not None and entry[0]() is model:  # only a chat model has an entry
        try:
            same = entry[1] == model.__dict__
        except Exception:  # a field whose == raises or is not a bool (an array): never cached
            same = False
        if same:
            return entry[2], dict(entry[3])
    if not isinstance(model, BaseChatModel):
        return _chat_params(model, {})
    fields = model.__dict__
    name, attributes = _chat_params(model, {})
    if len(_CHAT_PARAMS) >= _CHAT_PARAMS_MAX:
        _CHAT_PARAMS.pop(next(iter(_CHAT_PARAMS)), None)
    _CHAT_PARAMS[key] = (weakref.ref(model, functools.partial(_forget, key)), dict(fields), name, attributes)
    return name, dict(attributes)


def _forget(key: int, _ref: Any) -> None:
    _CHAT_PARAMS.pop(key, None)


class SpanTracer:
    """Makes the spans of our runs (a `ai_utils._run.tracing.RunTracer`).

    Args:
        tracer_provider: where spans go (default: OpenTelemetry's global provider).
        capture_content: add message text, tool arguments and tool results as span attributes.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None, *, capture_content: bool = False) -> None:
        self.handler = OpenTelemetryCallbackHandler(tracer_provider, capture_content=capture_content)
        self._tracer = self.handler._tracer

    def _content(self, span: Span, name: str, value: Callable[[], str]) -> None:
        self.handler._content(span, name, value)

    # The four methods of every traced turn (start_agent, start_chat, end_chat, end) catch for themselves: the
    # `_guarded` wrapper's extra call per hook is a visible share of what tracing adds to a zero-latency turn.

    def start_agent(self, name: str, conversation: str | None, parent: Any) -> Span | None:
        """``invoke_agent <name>``."""
        try:
            attributes: dict[str, Any] = {attrs.OPERATION_NAME: "invoke_agent", attrs.AGENT_NAME: name}
            if conversation is not None:
                attributes[attrs.CONVERSATION_ID] = conversation
            return self._tracer.start_span(
                f"invoke_agent {name}", context=_parent(parent), kind=SpanKind.INTERNAL, attributes=attributes
            )
        except Exception:
            _failed("start_agent")
            return None

    def start_chat(self, request: Any, conversation: str | None, parent: Any) -> Span | None:
        """``chat <model>``, from the model call's request (the model's LangSmith parameters name it)."""
        try:
            name, attributes = _chat_start(request.model, request.model_settings)
            if conversation is not None:
                attributes[attrs.CONVERSATION_ID] = conversation
            span = self._tracer.start_span(
                f"chat {name}" if name else "chat", context=_parent(parent), kind=SpanKind.CLIENT, attributes=attributes
            )
            if self.handler.capture_content:
                system = request.system_message
                sent = [system, *request.messages] if system is not None else list(request.messages)
                self._content(span, attrs.INPUT_MESSAGES, lambda: attrs.messages_json(sent))
        except Exception:
            _failed("start_chat")
            return None
        return span

    def end_chat(self, span: Span, response: Any) -> None:
        """Response model, usage, finish reasons (and the gateway's request id) on the ``chat`` span."""
        try:
            # A `ModelResponse`, or an `ExtendedModelResponse` around one (a failed getattr costs a raised error).
            inner = response.model_response if isinstance(response, ExtendedModelResponse) else response
            result = inner.result if isinstance(inner, ModelResponse) else None
            messages = [m for m in (result if result is not None else [inner]) if isinstance(m, AIMessage)]
            span.set_attributes(attrs.answer_attributes(messages))
            if self.handler.capture_content:
                self._content(span, attrs.OUTPUT_MESSAGES, lambda: attrs.messages_json(messages))
            span.end()
        except Exception:
            _failed("end_chat")

    @_guarded
    def start_tool(self, request: Any, conversation: str | None, parent: Any) -> Span:
        """``execute_tool <tool>``."""
        call = request.tool_call
        tool = request.tool
        serialized = {"name": tool.name, "description": tool.description} if tool is not None else None
        metadata = {"thread_id": conversation} if conversation is not None else None
        name, attributes = attrs.tool_attributes(serialized, call.get("name"), call.get("id"), metadata)
        span = self._tracer.start_span(
            f"execute_tool {name}", context=_parent(parent), kind=SpanKind.INTERNAL, attributes=attributes
        )
        # The model's arguments: the injected ones (the runtime and its context) are not among them.
        self._content(span, attrs.TOOL_CALL_ARGUMENTS, lambda: attrs.content_json(call.get("args")))
        return span

    @_guarded
    def end_tool(self, span: Span, result: Any) -> None:
        """The span ends; a ``ToolMessage`` with ``status="error"`` (a failure handed to the model) is an error."""
        failed = isinstance(result, ToolMessage) and result.status == "error"
        output = result.content if isinstance(result, ToolMessage) else result
        self._content(span, attrs.TOOL_CALL_RESULT, lambda: attrs.content_json(output))
        if failed:
            span.set_attribute(attrs.ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR, "tool_error"))
        span.end()

    @_guarded
    def paused(self, span: Span, interrupts: Sequence[Any]) -> None:
        """An ``interrupt`` event with the interrupts' ids (never their payloads)."""
        ids = [str(item.id) for item in interrupts if getattr(item, "id", None) is not None]
        span.add_event("interrupt", {"interrupt.ids": ids, "interrupt.count": len(ids)})

    def end(self, span: Span, error: BaseException | None = None) -> None:
        """End ``span``; an error's type (never its message) as its status; an interrupt is an event."""
        try:
            if error is None:
                span.end()
                return
            if isinstance(error, GraphBubbleUp):
                span.add_event("interrupt", _interrupt_ids(error))
            elif not isinstance(error, GeneratorExit):
                kind = type(error).__qualname__
                span.set_attribute(attrs.ERROR_TYPE, kind)
                span.set_status(Status(StatusCode.ERROR, kind))
            span.end()
        except Exception:
            _failed("end")
