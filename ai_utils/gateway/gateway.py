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
from uuid import uuid4

from ai_utils.exceptions import UserError
from ai_utils.gateway._recorder import AuditMode, CallRecorder, OnRecorder
from ai_utils.gateway.actor import Actor, to_actor
from ai_utils.gateway.audit import AuditEntry, AuditSink, NoopAuditSink
from ai_utils.gateway.callbacks import GatewayCallbackHandler
from ai_utils.gateway.completion import GatewayResponse, GatewayStream, atranslate, response_from, translate
from ai_utils.gateway.errors import GatewayError
from ai_utils.gateway.events import GatewayEvent
from ai_utils.gateway.policy import DEFAULT_POLICY, PolicyRule, feature_registered
from ai_utils.gateway.route import Route

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import Runnable

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
    ) -> GatewayCallbackHandler:
        """Build the callback handler that governs model calls of any LangChain run for ``feature``.

        Attach it with ``callbacks=[...]`` (model constructor, ``config``, or an agent run). An unknown feature is
        blocked at call time by ``feature_registered``.

        Args:
            feature: the feature.
            actor: the actor (`Actor` or mapping), merged with ``default_actor``.
            metadata: recorded on every audit row and event.

        Returns:
            A `GatewayCallbackHandler`.
        """
        merged = to_actor(actor)
        merged = merged.merged_with(self.default_actor) if merged is not None else self.default_actor
        return GatewayCallbackHandler(
            feature, recorder=self._recorder, routes=self.routes, policy=self.policy, actor=merged, metadata=metadata
        )

    def llm(
        self,
        feature: str,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> BaseChatModel:
        """Build the route's model (via `ai_utils.get_llm`) with this gateway's callback attached.

        Every call of the model — ``invoke``, ``stream``, their async twins, inside agents — is policy-checked
        before the provider sees it and audited once after.

        Args:
            feature: the feature.
            actor: the actor (`Actor` or mapping), merged with ``default_actor``.
            metadata: recorded on every audit row and event.

        Returns:
            The governed chat model.

        Raises:
            GatewayError: the feature has no route (after writing a ``blocked`` row and event).
        """
        return self._governed(feature, actor, metadata)[0]

    def _governed(
        self, feature: str, actor: Actor | Mapping[str, Any] | None, metadata: Mapping[str, Any] | None
    ) -> tuple[BaseChatModel, GatewayCallbackHandler, Route]:
        handler = self.callback(feature, actor=actor, metadata=metadata)
        route = handler.route
        if route is None:
            # Same pipeline as a call: blocked row, llm.policy.blocked event, GatewayError with the decisions.
            handler.on_chat_model_start({}, [], run_id=uuid4())
            self._no_route(feature)  # a custom chain without feature_registered let it through
        from ai_utils.llm import get_llm

        model = get_llm(route.provider, route.model, **dict(route.options))
        model.callbacks = [*_as_list(model.callbacks), handler]
        return model, handler, route

    def _prepare(
        self,
        feature: str,
        actor: Actor | Mapping[str, Any] | None,
        metadata: Mapping[str, Any] | None,
        tools: Sequence[Any],
    ) -> tuple[Runnable[Any, BaseMessage], GatewayCallbackHandler, Route, dict[str, Any]]:
        model, handler, route = self._governed(feature, actor, metadata)
        runnable: Runnable[Any, BaseMessage] = model.bind_tools(list(tools)) if tools else model
        return runnable, handler, route, {"run_id": uuid4()}

    def complete(
        self,
        feature: str,
        messages: Any,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: Sequence[Any] = (),
    ) -> GatewayResponse:
        """Make one governed call (the seed's ``gateway.complete``).

        Args:
            feature: the feature.
            messages: a string, LangChain messages or ``{"role", "content"}`` dicts.
            actor: the actor.
            metadata: recorded on the audit row and events.
            tools: tools to offer (anything ``bind_tools`` accepts).

        Returns:
            The `GatewayResponse` (text, request id, decisions, tool calls, usage).

        Raises:
            GatewayError: the policy denied the call (no provider call was made).
        """
        runnable, handler, route, config = self._prepare(feature, actor, metadata, tools)
        message = runnable.invoke(messages, config=config)  # type: ignore[arg-type]
        return response_from(message, str(config["run_id"]), route.model, route.provider, handler.last_decisions)

    async def acomplete(
        self,
        feature: str,
        messages: Any,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: Sequence[Any] = (),
    ) -> GatewayResponse:
        """Async `complete`, with the same arguments, result and errors."""
        runnable, handler, route, config = self._prepare(feature, actor, metadata, tools)
        message = await runnable.ainvoke(messages, config=config)  # type: ignore[arg-type]
        return response_from(message, str(config["run_id"]), route.model, route.provider, handler.last_decisions)

    def stream(
        self,
        feature: str,
        messages: Any,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: Sequence[Any] = (),
    ) -> GatewayStream:
        """Stream one governed call as the seed's chunks; audited once at the end with the assembled text.

        The arguments are `complete`'s.

        Returns:
            A `GatewayStream` (``request_id`` known up front); iterate it with ``for``.
        """
        runnable, _, route, config = self._prepare(feature, actor, metadata, tools)
        chunks = translate(runnable.stream(messages, config=config))  # type: ignore[arg-type]
        return GatewayStream(str(config["run_id"]), route.model, route.provider, chunks)

    def astream(
        self,
        feature: str,
        messages: Any,
        *,
        actor: Actor | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: Sequence[Any] = (),
    ) -> GatewayStream:
        """Async `stream`, with the same arguments: iterate the `GatewayStream` with ``async for``."""
        runnable, _, route, config = self._prepare(feature, actor, metadata, tools)
        chunks = atranslate(runnable.astream(messages, config=config))  # type: ignore[arg-type]
        return GatewayStream(str(config["run_id"]), route.model, route.provider, chunks)


def _as_list(callbacks: Any) -> list[Any]:
    if callbacks is None:
        return []
    if isinstance(callbacks, list):
        return callbacks
    return [callbacks]
