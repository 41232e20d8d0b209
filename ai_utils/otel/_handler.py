"""`OpenTelemetryCallbackHandler`: GenAI semantic-convention spans from LangChain callbacks (extra ``otel``).

One sync handler, run inline (``run_inline``): no executor hop in async runs, so callbacks arrive in order on the
run's own thread or task; a lock guards the run map, as handlers may run in a tool's thread. Spans:

- ``invoke_agent <name>`` (INTERNAL) for the outermost run of an agent graph (``create_agent``'s metadata marks
  its runs; a subagent with another ``lc_agent_name`` gets its own);
- ``chat <model>`` (CLIENT) per model call, ``execute_tool <tool>`` (INTERNAL) per tool call.

A span's parent is the nearest recorded ancestor, found through the ``parent_run_id`` map, and passed with
``set_span_in_context``: a context is never attached or detached here (start and end callbacks may run in
different tasks, which breaks detach and splits traces). The outermost run takes the ambient context once, so an
application's request span is its parent. Interrupts (`GraphBubbleUp`) end a span without error, with an
``interrupt`` event carrying ids only. Content (messages, tool arguments and results) goes out only with
``capture_content``, through `_content`, the one gate, which redacts the secrets in it; the run's ``context``
never (it is not in callback arguments, and exception messages, which may quote anything, are never recorded:
the error type is). A bounded run map: runs left open when their outermost run ends are ended with it, and at
most `MAX_RUNS` are kept.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.messages import ToolMessage
from langgraph.callbacks import GraphCallbackHandler, GraphInterruptEvent
from langgraph.errors import GraphBubbleUp

from ai_utils._optional import missing_extra
from ai_utils._run import tracing
from ai_utils._secrets import redact_secrets
from ai_utils.otel import _attributes as attrs

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
except ImportError as _import_error:
    raise missing_extra("opentelemetry-api", extra="otel", feature="OpenTelemetry tracing") from _import_error

__all__ = ["MAX_RUNS", "OpenTelemetryCallbackHandler"]

logger = logging.getLogger(__name__)

MAX_RUNS = 10_000
"""Open runs one handler tracks at most; the oldest is ended (and dropped) past it."""


class _Run:
    """A run the handler tracks: its span (if it has one) and what its children hang under."""

    __slots__ = ("_context", "agent", "in_agent", "owner", "parent_context", "root", "span")

    def __init__(
        self,
        span: Span | None,
        parent_context: otel_context.Context,
        owner: Span | None,
        root: UUID,
        agent: str | None,
        in_agent: bool,
    ) -> None:
        self.span = span  # this run's own span
        self.parent_context = parent_context  # the context its own span started in
        self.owner = owner  # the nearest span at or above this run
        self.root = root  # the outermost tracked run
        self.agent = agent  # the agent this run belongs to (lc_agent_name), for nested agents
        self.in_agent = in_agent
        self._context: otel_context.Context | None = None

    @property
    def context(self) -> otel_context.Context:
        """The context its children's spans start in (made when the first child asks: most spans have none)."""
        if self.span is None:
            return self.parent_context
        if self._context is None:
            self._context = trace.set_span_in_context(self.span, self.parent_context)
        return self._context


def _guarded(method: Callable[..., None]) -> Callable[..., None]:
    """Never let a tracing problem break the run: log it and go on.

    A run that traces itself with this handler's tracer (`ai_utils._run.tracing`) is left to it: the handler may
    reach such a run (one of ours started in a tool) through the callbacks it inherits.
    """

    def guarded(self: OpenTelemetryCallbackHandler, *args: Any, **kwargs: Any) -> None:
        if tracing.traces_itself(self):
            return
        try:
            method(self, *args, **kwargs)
        except Exception:
            logger.debug("OpenTelemetry callback %s failed", method.__name__, exc_info=True)

    guarded.__name__ = method.__name__
    guarded.__doc__ = method.__doc__
    return guarded


class OpenTelemetryCallbackHandler(GraphCallbackHandler):
    """Emits GenAI semantic-convention spans for the runs it is attached to (see the module docstring).

    Args:
        tracer_provider: where spans go (default: OpenTelemetry's global provider, looked up at each span).
        capture_content: add message text, tool arguments and tool results as span attributes.
    """

    run_inline = True
    raise_error = False

    def __init__(self, tracer_provider: TracerProvider | None = None, *, capture_content: bool = False) -> None:
        from ai_utils import __version__

        self._tracer = trace.get_tracer("ai_utils", __version__, tracer_provider=tracer_provider)
        self.capture_content = bool(capture_content)
        self._runs: OrderedDict[UUID, _Run] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def ignore_retriever(self) -> bool:
        """Retrievers get no span of their own."""
        return True

    @property
    def ignore_custom_event(self) -> bool:
        """Custom events are not traced."""
        return True

    # --- the run map --------------------------------------------------------------------------------------

    def _parent(self, parent_run_id: UUID | None) -> _Run | None:
        return self._runs.get(parent_run_id) if parent_run_id is not None else None

    def _put(self, run_id: UUID, run: _Run) -> None:
        self._runs[run_id] = run
        while len(self._runs) > MAX_RUNS:
            _, oldest = self._runs.popitem(last=False)
            if oldest.span is not None:
                oldest.span.end()

    def _start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        name: str,
        kind: SpanKind,
        attributes: Mapping[str, Any],
        *,
        agent: str | None = None,
        agent_span: bool = False,
    ) -> Span:
        with self._lock:
            parent = self._parent(parent_run_id)
            context = parent.context if parent is not None else otel_context.get_current()
            span = self._tracer.start_span(name, context=context, kind=kind, attributes=attributes)
            self._put(
                run_id,
                _Run(
                    span,
                    context,
                    span,
                    parent.root if parent is not None else run_id,
                    agent if agent_span or parent is None else parent.agent,
                    agent_span or (parent is not None and parent.in_agent),
                ),
            )
        return span

    def _finish(self, run_id: UUID) -> _Run | None:
        """Forget ``run_id``; when it is an outermost run, end what it left open."""
        with self._lock:
            run = self._runs.pop(run_id, None)
            stragglers = []
            if run is not None and run.root == run_id:
                stragglers = [key for key, other in self._runs.items() if other.root == run_id]
                left = [self._runs.pop(key) for key in stragglers]
            else:
                left = []
        for other in left:
            if other.span is not None:
                other.span.end()
        return run

    def _end(self, run_id: UUID, error: BaseException | None = None, error_type: str | None = None) -> None:
        run = self._finish(run_id)
        if run is None or run.span is None:
            return
        span = run.span
        if error is not None and isinstance(error, GraphBubbleUp):
            span.add_event("interrupt", _interrupt_ids(error))
        elif error is not None or error_type is not None:
            kind = error_type or type(error).__qualname__
            span.set_attribute(attrs.ERROR_TYPE, kind)
            span.set_status(Status(StatusCode.ERROR, kind))
        span.end()

    def _content(self, span: Span, name: str, value: Callable[[], str]) -> None:
        """The one gate for content: message text, tool arguments and results go out only when asked for.

        Even then a secret in them (an API key a user pasted, a token a tool echoed) goes out redacted, with the
        shapes guardrails redact (`ai_utils._secrets`): traces are kept and shared more widely than the run.
        """
        if self.capture_content:
            span.set_attribute(name, redact_secrets(value())[0])

    # --- chains: agent runs ---------------------------------------------------------------------------------

    @_guarded
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """An agent graph's outermost run opens ``invoke_agent``; other chain runs only link parents."""
        is_agent, agent = attrs.agent_identity(metadata)
        with self._lock:
            parent = self._parent(parent_run_id)
            opens = is_agent and (parent is None or not parent.in_agent or parent.agent != agent)
            if not opens:
                context = parent.context if parent is not None else otel_context.get_current()
                self._put(
                    run_id,
                    _Run(
                        None,
                        context,
                        parent.owner if parent is not None else None,
                        parent.root if parent is not None else run_id,
                        parent.agent if parent is not None else None,
                        parent is not None and parent.in_agent,
                    ),
                )
                return
        name = agent or str(kwargs.get("name") or "agent")
        self._start(
            run_id,
            parent_run_id,
            f"invoke_agent {name}",
            SpanKind.INTERNAL,
            attrs.agent_attributes(name, metadata),
            agent=agent,
            agent_span=True,
        )

    @_guarded
    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """The run's span (if any) ends."""
        self._end(run_id)

    @_guarded
    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Error status and ``error.type``; an interrupt is not an error."""
        self._end(run_id, error)

    @_guarded
    def on_interrupt(self, event: GraphInterruptEvent) -> None:
        """A paused graph: an ``interrupt`` event (ids only) on its run's span."""
        if event.run_id is None:
            return
        with self._lock:
            run = self._runs.get(event.run_id)
        if run is not None and run.owner is not None:
            ids = [str(item.id) for item in event.interrupts]
            run.owner.add_event("interrupt", {"interrupt.ids": ids, "interrupt.count": len(ids)})

    def on_resume(self, event: Any) -> None:
        """Nothing: the resumed run's own spans tell it."""

    # --- model calls ----------------------------------------------------------------------------------------

    @_guarded
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """``chat <model>``."""
        model, attributes = attrs.chat_attributes(metadata, invocation_params)
        span = self._start(run_id, parent_run_id, f"chat {model}" if model else "chat", SpanKind.CLIENT, attributes)
        self._content(span, attrs.INPUT_MESSAGES, lambda: attrs.messages_json(messages[0] if messages else []))

    @_guarded
    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """``text_completion <model>`` for a completion (non-chat) model."""
        model, attributes = attrs.chat_attributes(metadata, invocation_params)
        attributes[attrs.OPERATION_NAME] = "text_completion"
        name = f"text_completion {model}" if model else "text_completion"
        span = self._start(run_id, parent_run_id, name, SpanKind.CLIENT, attributes)
        self._content(span, attrs.INPUT_MESSAGES, lambda: attrs.content_json(prompts))

    @_guarded
    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Response model, usage, finish reasons (and the gateway's request id) on the ``chat`` span."""
        with self._lock:
            run = self._runs.get(run_id)
        if run is not None and run.span is not None:
            attributes, messages = attrs.chat_result(response)
            run.span.set_attributes(attributes)
            self._content(run.span, attrs.OUTPUT_MESSAGES, lambda: attrs.messages_json(messages))
        self._end(run_id)

    @_guarded
    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Error status and ``error.type`` on the ``chat`` span."""
        self._end(run_id, error)

    # --- tool calls -----------------------------------------------------------------------------------------

    @_guarded
    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """``execute_tool <tool>``; the tool run of a call our run path traces already only links its children."""
        zone = tracing.active()
        if type(zone) is tracing.Zone and zone.handler is self and kwargs.get("tool_call_id") == zone.call_id:
            with self._lock:
                if parent_run_id is None or parent_run_id not in self._runs:
                    # In the agent the tool belongs to: another agent's graph in it (a subagent) opens its own
                    # invoke_agent, a plain chain does not.
                    in_agent, agent = attrs.agent_identity(metadata)
                    context = trace.set_span_in_context(zone.span)
                    self._put(run_id, _Run(None, context, zone.span, run_id, agent, in_agent))
                    return
        tool, attributes = attrs.tool_attributes(serialized, kwargs.get("name"), kwargs.get("tool_call_id"), metadata)
        span = self._start(run_id, parent_run_id, f"execute_tool {tool}", SpanKind.INTERNAL, attributes)
        # LangChain leaves the injected arguments (the runtime and its context) out of ``inputs``.
        self._content(
            span, attrs.TOOL_CALL_ARGUMENTS, lambda: attrs.content_json(inputs if inputs is not None else input_str)
        )

    @_guarded
    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """The tool's span ends; a `ToolMessage` with ``status="error"`` (a failure handed to the model) is an error."""
        failed = isinstance(output, ToolMessage) and output.status == "error"
        with self._lock:
            run = self._runs.get(run_id)
        if run is not None and run.span is not None:
            result = output.content if isinstance(output, ToolMessage) else output
            self._content(run.span, attrs.TOOL_CALL_RESULT, lambda: attrs.content_json(result))
        self._end(run_id, error_type="tool_error" if failed else None)

    @_guarded
    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Error status and ``error.type``; an interrupt raised in a tool is not an error."""
        self._end(run_id, error)


def _interrupt_ids(error: BaseException) -> dict[str, Any]:
    """The ids of the interrupts a `GraphBubbleUp` carries (never their payloads)."""
    items = error.args[0] if error.args and isinstance(error.args[0], Sequence) else ()
    ids = [str(item.id) for item in items if getattr(item, "id", None) is not None]
    return {"interrupt.ids": ids, "interrupt.count": len(ids)}
