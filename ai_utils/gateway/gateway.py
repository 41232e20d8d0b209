"""`Gateway`: feature routing (`Route`, in `ai_utils.gateway.route`), policy, audit and events for model calls.

```python
from ai_utils.gateway import Gateway, Route, SqliteAuditSink

gateway = Gateway(
    routes=[Route("support.triage", "openai", "gpt-4.1-mini")],
    audit=SqliteAuditSink("audit.db"),
    default_actor={"tenant_id": "demo"},
)
llm = gateway.llm("support.triage", actor={"user_id": "u_1"})      # a governed BaseChatModel
agent = Agent(llm=llm, tools=[...])                                  # one audit row per model call
other_model.invoke("hi", config={"callbacks": [gateway.callback("support.triage", actor=actor)]})
```
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn
from uuid import UUID, uuid4

from ai_utils.exceptions import UserError
from ai_utils.gateway._recorder import AuditMode, CallRecorder, OnRecorder
from ai_utils.gateway._request import PreparedCall, Request, prepare_call
from ai_utils.gateway._secrets import model_secrets
from ai_utils.gateway.actor import Actor, to_actor
from ai_utils.gateway.audit import AuditEntry, AuditSink, NoopAuditSink
from ai_utils.gateway.callbacks import GatewayCallbackHandler
from ai_utils.gateway.completion import GatewayResponse, GatewayStream, atranslate, translate
from ai_utils.gateway.dropped import OnDroppedContent
from ai_utils.gateway.errors import GatewayError
from ai_utils.gateway.events import GatewayEvent
from ai_utils.gateway.policy import DEFAULT_POLICY, PolicyRule, feature_registered
from ai_utils.gateway.route import Route

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from ai_utils.llm._request import ResponseFormat

__all__ = ["AuditMode", "Gateway", "Route"]


class Gateway:
    """Route features to models, check policy before every call, audit and report every call.

    Args:
        routes: the feature → provider + model bindings (features must be unique).
        policy: the policy chain; default `DEFAULT_POLICY` (``feature_registered``, ``require_actor``), or only
            ``feature_registered`` with ``enforce_actor=False``. A given chain is used as is.
        audit: the audit sink; default `NoopAuditSink`.
        audit_mode: ``"best-effort"`` reports a sink failure to ``on_audit_error`` and lets the call succeed;
            ``"required"`` then fails the call with `AuditWriteError`.
        on_event: called with every `GatewayEvent` (sync, or async: then scheduled on the running loop).
            Its errors are logged, never raised.
        on_audit_error: ``(error, entry)`` for a failed audit write; default logs the full row at ERROR.
        default_actor: merged onto every call's actor (or used when none is given).
        enforce_actor: with the default policy, require an actor.
        now: the clock for ``created_at``; default ``datetime.now(UTC)``.

    Raises:
        UserError: duplicate features or an unknown ``audit_mode``.
    """

    # Kept on the recorder the handlers write through, so a change reaches handlers already handed out.
    audit: OnRecorder[AuditSink] = OnRecorder()
    audit_mode: OnRecorder[AuditMode] = OnRecorder()
    on_event: OnRecorder[Callable[[GatewayEvent], Any] | None] = OnRecorder()
    on_audit_error: OnRecorder[Callable[[BaseException, AuditEntry], Any]] = OnRecorder()
    now: OnRecorder[Callable[[], datetime]] = OnRecorder()

    def __init__(
        self,
        *,
        routes: Sequence[Route],
        policy: Sequence[PolicyRule] | None = None,
        audit: AuditSink | None = None,
        audit_mode: AuditMode = "best-effort",
        on_event: Callable[[GatewayEvent], Any] | None = None,
        on_audit_error: Callable[[BaseException, AuditEntry], Any] | None = None,
        default_actor: Actor | Mapping[str, Any] | None = None,
        enforce_actor: bool = True,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        if audit_mode not in ("best-effort", "required"):
            raise UserError(f"Unknown audit_mode {audit_mode!r}. Use 'best-effort' or 'required'.")
        table: dict[str, Route] = {}
        for route in routes:
            if route.feature in table:
                raise UserError(f"Feature {route.feature!r} is routed twice. Keep one Route per feature.")
            table[route.feature] = route
        self.routes: Mapping[str, Route] = table
        self.features: frozenset[str] = frozenset(table)
        if policy is None:
            policy = DEFAULT_POLICY if enforce_actor else (feature_registered,)
        self.policy: tuple[PolicyRule, ...] = tuple(policy)
        self.default_actor = to_actor(default_actor)
        self.enforce_actor = enforce_actor
        self._models: dict[str, BaseChatModel] = {}
        self._invoke_models: dict[str, BaseChatModel] = {}
        self._secrets: dict[str, tuple[str, ...]] = {}
        # Sink, mode, hooks and clock live on the recorder every handler of this gateway writes through.
        self._recorder = CallRecorder(
            audit=audit if audit is not None else NoopAuditSink(),
            audit_mode=audit_mode,
            on_event=on_event,
            on_audit_error=on_audit_error,
            now=now or (lambda: datetime.now(UTC)),
        )

    def route(self, feature: str) -> Route:
        """Return the route of a feature.

        Args:
            feature: the feature.

        Returns:
            Its route.

        Raises:
            GatewayError: the feature has no route.
        """
        route = self.routes.get(feature)
        if route is None:
            self._no_route(feature)
        return route

    def _no_route(self, feature: str) -> NoReturn:
        known = ", ".join(sorted(self.features)) or "none"
        raise GatewayError(f"Feature {feature!r} has no route (known: {known}). Add a Route for it.")

    def callback(
        self,
        feature: str,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        parent_run_id: str | UUID | None = None,
    ) -> GatewayCallbackHandler:
        """Build the callback handler that governs model calls of any LangChain run for ``feature``.

        Attach it with ``callbacks=[...]`` (model constructor, ``config``, or an agent run). An unknown feature is
        blocked at call time by ``feature_registered``.

        Args:
            feature: the feature.
            actor: the actor (`Actor` or mapping), merged with ``default_actor``.
            metadata: recorded on every audit row and event.
            parent_run_id: recorded as the rows' ``parent_run_id`` (e.g. the run a judge scores).

        Returns:
            A `GatewayCallbackHandler`.
        """
        return self._handler(feature, actor, metadata, parent_run_id, self.policy)

    def _handler(
        self,
        feature: str,
        actor: Actor | Mapping[str, Any] | None,
        metadata: Mapping[str, Any] | None,
        parent_run_id: str | UUID | None,
        policy: Sequence[PolicyRule],
    ) -> GatewayCallbackHandler:
        merged = to_actor(actor)
        merged = merged.merged_with(self.default_actor) if merged is not None else self.default_actor
        return GatewayCallbackHandler(
            feature,
            recorder=self._recorder,
            routes=self.routes,
            policy=policy,
            actor=merged,
            metadata=metadata,
            parent_run_id=str(parent_run_id) if parent_run_id is not None else None,
        )

    def llm(
        self,
        feature: str,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        parent_run_id: str | UUID | None = None,
    ) -> BaseChatModel:
        """Build the route's model (via `ai_utils.get_llm`) with this gateway's callback attached.

        Every call of the model — ``invoke``, ``stream``, their async twins, inside agents — is policy-checked
        before the provider sees it and audited once after.

        Args:
            feature: the feature.
            actor: the actor (`Actor` or mapping), merged with ``default_actor``.
            metadata: recorded on every audit row and event.
            parent_run_id: recorded as the rows' ``parent_run_id``.

        Returns:
            The governed chat model.

        Raises:
            GatewayError: the feature has no route (after writing a ``blocked`` row and event).
        """
        handler = self.callback(feature, actor=actor, metadata=metadata, parent_run_id=parent_run_id)
        route = self._checked_route(handler)
        from ai_utils.llm import get_llm

        model = get_llm(route.provider, route.model, **dict(route.options))
        handler.secrets = model_secrets(model)
        model.callbacks = [*_as_list(model.callbacks), handler]
        return model

    def _checked_route(self, handler: GatewayCallbackHandler) -> Route:
        route = handler.route
        if route is None:
            # Same pipeline as a call: blocked row, llm.policy.blocked event, GatewayError with the decisions.
            handler.on_chat_model_start({}, [], run_id=uuid4())
            self._no_route(handler.feature)  # a custom chain without feature_registered let it through
        return route

    def _model(self, route: Route) -> BaseChatModel:
        """The route's model for `complete`/`stream`, built once per route (callbacks go per call, in the config)."""
        model = self._models.get(route.feature)
        if model is None:
            from ai_utils.llm import get_llm

            model = self._models[route.feature] = get_llm(route.provider, route.model, **dict(route.options))
            self._secrets[route.feature] = model_secrets(model)
        return model

    def _invoke_model(self, route: Route) -> BaseChatModel:
        """The route's model for `complete`/`acomplete`, built once per route: the same model, streaming off.

        LangChain streams an ``invoke`` when a streaming handler (``astream_events``, LangGraph's messages mode)
        is attached, and finds out with a slow runtime ``Protocol`` check of every handler on every call. A
        gateway call names its callbacks in its own config, which replaces an enclosing run's, so its handlers are
        the gateway's, the model's own and LangChain's configure hooks (tracers, usage, `ai_utils.otel`), none of
        them streaming: the answer is always "no". A copy with ``disable_streaming=True`` gives it before the check.
        A model that streams by itself, has callbacks of its own or is a fallback chain (its attempts are models
        of their own) is used as it is.
        """
        model = self._invoke_models.get(route.feature)
        if model is None:
            model = self._model(route)
            if not (
                model.callbacks
                or model.disable_streaming
                or getattr(model, "streaming", None) is True
                or callable(getattr(type(model), "bind_request", None))
            ):
                model = model.model_copy(update={"disable_streaming": True})
            self._invoke_models[route.feature] = model
        return model

    def _prepare(self, feature: str, messages: Any, request: Request, *, invoke: bool = False) -> PreparedCall:
        handler = self._handler(feature, request.actor, request.metadata, request.parent_run_id, self.policy)
        route = self._checked_route(handler)
        model = self._invoke_model(route) if invoke else self._model(route)
        handler.secrets = self._secrets[route.feature]
        call = prepare_call(route, messages, request, model=model)
        if call.refusal is not None:
            # The refusal runs as one more policy rule of this call: blocked row, event, GatewayError, no provider call.
            handler.policy = (*handler.policy, call.refusal)
        call.config["callbacks"] = [handler]
        call.handler = handler
        return call

    def complete(
        self,
        feature: str,
        messages: Any,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: Sequence[Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: ResponseFormat | None = None,
        betas: Sequence[str] | None = None,
        parent_run_id: str | UUID | None = None,
        strict_text_only: bool = False,
        on_dropped_content: OnDroppedContent | None = None,
    ) -> GatewayResponse:
        """Make one governed call (the seed's ``gateway.complete``).

        Args:
            feature: the feature.
            messages: a string, LangChain messages or ``{"role", "content"}`` dicts.
            actor: the actor.
            metadata: recorded on the audit row and events.
            tools: tools to offer (anything ``bind_tools`` accepts).
            temperature: sampling temperature for this call.
            max_tokens: output token cap for this call.
            response_format: ``"text"``, ``"json_object"`` or ``{"type": "json_schema", "json_schema": {"name",
                "schema"}}``, translated for the provider (Gemini: ``response_mime_type``/``response_json_schema``;
                Anthropic: ``output_config.format``, JSON schema only; DeepSeek: ``json_object`` only).
            betas: provider beta flags (Anthropic, e.g. ``["computer-use-2025-01-24"]``); dropped and reported
                for other providers.
            parent_run_id: recorded as the audit row's ``parent_run_id`` (correlate multi-step runs).
            strict_text_only: on a text-only route, refuse a call with non-text content (`GatewayError`, before any
                provider call) instead of stripping it.
            on_dropped_content: told what the call does not send (`DroppedContentReport`) before the provider
                call; default: one logged warning with counts (never content).

        Returns:
            The `GatewayResponse` (text, message, usage, model, provider, request id, latency, cache hit, content
            blocks, dropped content, policy decisions, tool calls).

        Raises:
            GatewayError: the policy denied the call, or ``strict_text_only`` refused it (no provider call made).
            UserError: unreadable messages or a malformed option.
        """
        request = Request(
            actor, metadata, tools, temperature, max_tokens, response_format, betas, parent_run_id,
            strict_text_only, on_dropped_content,
        )  # fmt: skip
        call = self._prepare(feature, messages, request, invoke=True)
        message = call.runnable.invoke(call.messages, config=call.config)
        return call.response(message)

    async def acomplete(
        self,
        feature: str,
        messages: Any,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: Sequence[Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: ResponseFormat | None = None,
        betas: Sequence[str] | None = None,
        parent_run_id: str | UUID | None = None,
        strict_text_only: bool = False,
        on_dropped_content: OnDroppedContent | None = None,
    ) -> GatewayResponse:
        """Async `complete`, with the same arguments, result and errors."""
        request = Request(
            actor, metadata, tools, temperature, max_tokens, response_format, betas, parent_run_id,
            strict_text_only, on_dropped_content,
        )  # fmt: skip
        call = self._prepare(feature, messages, request, invoke=True)
        message = await call.runnable.ainvoke(call.messages, config=call.config)
        return call.response(message)

    def stream(
        self,
        feature: str,
        messages: Any,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: Sequence[Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: ResponseFormat | None = None,
        betas: Sequence[str] | None = None,
        parent_run_id: str | UUID | None = None,
        strict_text_only: bool = False,
        on_dropped_content: OnDroppedContent | None = None,
    ) -> GatewayStream:
        """Stream one governed call as the seed's chunks; audited once at the end with the assembled text.

        The arguments are `complete`'s. Content and options are dropped (and reported) when this is called; the
        policy (and a ``strict_text_only`` refusal) runs when iteration starts, before the provider call.

        Returns:
            A `GatewayStream` (``request_id`` and ``dropped_content`` known up front); iterate it with ``for``.
        """
        request = Request(
            actor, metadata, tools, temperature, max_tokens, response_format, betas, parent_run_id,
            strict_text_only, on_dropped_content,
        )  # fmt: skip
        call = self._prepare(feature, messages, request)
        chunks = translate(call.runnable.stream(call.messages, config=call.config))
        return call.stream(chunks)

    def astream(
        self,
        feature: str,
        messages: Any,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: Sequence[Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        response_format: ResponseFormat | None = None,
        betas: Sequence[str] | None = None,
        parent_run_id: str | UUID | None = None,
        strict_text_only: bool = False,
        on_dropped_content: OnDroppedContent | None = None,
    ) -> GatewayStream:
        """Async `stream`, with the same arguments: iterate the `GatewayStream` with ``async for``."""
        request = Request(
            actor, metadata, tools, temperature, max_tokens, response_format, betas, parent_run_id,
            strict_text_only, on_dropped_content,
        )  # fmt: skip
        call = self._prepare(feature, messages, request)
        chunks = atranslate(call.runnable.astream(call.messages, config=call.config))
        return call.stream(chunks)


def _as_list(callbacks: Any) -> list[Any]:
    if callbacks is None:
        return []
    if isinstance(callbacks, list):
        return callbacks
    return [callbacks]
