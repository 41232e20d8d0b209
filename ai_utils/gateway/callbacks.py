"""`GatewayCallbackHandler`: policy before the provider call, one audit row and events after it.

One sync handler with ``run_inline=True``: LangChain then calls it directly on the async path too instead of
hopping to a thread per event (that hop measured 1.6–1.8x per agent turn). Its methods are cheap: build the row,
hand it to the sink, return. ``raise_error=True`` lets a policy denial (and, in required audit mode, a failed
audit write) stop the run. In required mode a ``pending`` row is written before the provider call and completed
after it, so a sink that cannot write fails the call before any token is produced.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from ai_utils.gateway.actor import Actor
from ai_utils.gateway.audit import AuditEntry, AuditStatus
from ai_utils.gateway.errors import GatewayError, classify_llm_error
from ai_utils.gateway.events import GatewayEvent, GatewayEventType
from ai_utils.gateway.hashing import _canonical_json, truncate_for_audit
from ai_utils.gateway.policy import PolicyContext, PolicyDecision, run_policy_chain

if TYPE_CHECKING:
    from ai_utils.gateway.gateway import Gateway, Route

__all__ = ["POLICY_TAP", "GatewayCallbackHandler", "PolicyTap"]

# LangChain/LangGraph bookkeeping keys that do not belong in audit metadata.
_INTERNAL_PREFIXES = ("ls_", "lc_", "langgraph_", "checkpoint_", "__")


class PolicyTap(Protocol):
    """A policy engine outside the gateway (e.g. guardrails middleware) reporting on the model call it wraps.

    The engine sets `POLICY_TAP` around the call; the handler of that call puts the engine's decisions into the
    call's audit row (``policy_decisions``, after the gateway's own) and audits the answer as the engine shows it.
    Decisions never carry the content they acted on.
    """

    def before_call(self) -> list[dict[str, Any]]:
        """Decisions taken on the way to this call (input, context, tool results)."""
        ...

    def after_call(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        """The answer ``text`` as the engine lets the client see it, and the decisions taken on it."""
        ...


POLICY_TAP: ContextVar[PolicyTap | None] = ContextVar("ai_utils_policy_tap", default=None)
"""The `PolicyTap` of the model call running in this context, if a policy engine wraps it."""


@dataclass(slots=True)
class _Pending:
    request_id: str
    started: float
    actor: dict[str, Any] | None
    tenant_id: str | None
    decisions: list[dict[str, Any]]
    tools_requested: list[str]
    views: list[dict[str, Any]]
    parent_run_id: str | None
    metadata: dict[str, Any]
    tap: PolicyTap | None = None
    # The concrete model the call was sent to (its invocation params), e.g. the fallback that answered.
    model: str | None = None


def _invoked_model(invocation_params: Any) -> str | None:
    if not isinstance(invocation_params, Mapping):
        return None
    model = invocation_params.get("model") or invocation_params.get("model_name")
    return model if isinstance(model, str) and model else None


def _tool_names(invocation_params: Any) -> list[str]:
    if not isinstance(invocation_params, Mapping):
        return []
    names: list[str] = []
    for tool in invocation_params.get("tools") or ():
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else None
            name = name or tool.get("name") or tool.get("type")
            if name:
                names.append(str(name))
    return names


def _message_view(message: BaseMessage) -> dict[str, Any]:
    view: dict[str, Any] = {"role": message.type, "content": message.content}
    if isinstance(message, AIMessage) and message.tool_calls:
        view["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
    return view


def _hash_and_summary(
    feature_json: str, model_json: str, views: list[dict[str, Any]], tools: list[str]
) -> tuple[str, str]:
    """``hash_canonical({"feature", "model", "messages", "tools"})`` and the messages summary, serializing once.

    The hashed text is what `hash_canonical` builds for that dict (keys sorted: feature, messages, model, tools);
    the messages JSON, the bulk of it, is reused for the summary. Feature and model come as JSON already (they
    are fixed per handler).
    """
    messages = _canonical_json(views)
    canonical = (
        f'{{"feature":{feature_json},"messages":{messages},"model":{model_json},"tools":{_canonical_json(tools)}}}'
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest(), truncate_for_audit(messages)


class GatewayCallbackHandler(BaseCallbackHandler):
    """Govern every model call of a LangChain run for one gateway feature.

    Get one from `Gateway.callback` (or implicitly from `Gateway.llm`) and attach it with ``callbacks=[...]`` to a
    model, chain, graph or agent run.

    Attributes:
        feature: the feature.
        route: its route (``None`` for an unknown feature, which the policy then blocks).
        actor: the actor, merged with the gateway's ``default_actor``.
        request_ids: ids of the last 1000 calls this handler has seen, in start order.
        last_decisions: the policy decisions of the latest call.
    """

    raise_error: bool = True
    run_inline: bool = True

    def __init__(
        self,
        gateway: Gateway,
        feature: str,
        *,
        actor: Actor | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.gateway = gateway
        self.feature = feature
        self.route: Route | None = gateway.routes.get(feature)
        self.actor = actor
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.request_ids: deque[str] = deque(maxlen=1000)
        self.last_decisions: list[PolicyDecision] = []
        self._pending: dict[UUID, _Pending] = {}
        self._actor_audit = actor.to_audit() if actor is not None else None
        self._feature_json = _canonical_json(feature)
        self._model_json = _canonical_json(self._model)

    @property
    def ignore_chain(self) -> bool:
        """Chain events carry nothing the gateway needs."""
        return True

    @property
    def ignore_agent(self) -> bool:
        """Agent events carry nothing the gateway needs."""
        return True

    @property
    def ignore_retriever(self) -> bool:
        """Retriever events carry nothing the gateway needs."""
        return True

    @property
    def ignore_retry(self) -> bool:
        """Retry events carry nothing the gateway needs."""
        return True

    @property
    def ignore_custom_event(self) -> bool:
        """Custom events carry nothing the gateway needs."""
        return True

    @property
    def _provider(self) -> str:
        return self.route.provider if self.route is not None else ""

    @property
    def _model(self) -> str:
        return self.route.model if self.route is not None else ""

    # -- LangChain hooks ------------------------------------------------------------------------------------------

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Run the policy chain; a denial writes a ``blocked`` row and raises `GatewayError` before the provider call.

        Args:
            serialized: the model's serialized form.
            messages: the prompts (one list per prompt).
            run_id: the LangChain run id, used as the request id.
            parent_run_id: the enclosing run.
            tags: run tags.
            metadata: run metadata.
            **kwargs: ``invocation_params`` (with the bound tools) and more.
        """
        views = [_message_view(m) for batch in messages for m in batch]
        params = kwargs.get("invocation_params")
        self._start(run_id, parent_run_id, views, _tool_names(params), metadata, _invoked_model(params))

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Same as `on_chat_model_start`, for completion (non-chat) models.

        Args:
            serialized: the model's serialized form.
            prompts: the prompts.
            run_id: the LangChain run id, used as the request id.
            parent_run_id: the enclosing run.
            tags: run tags.
            metadata: run metadata.
            **kwargs: ``invocation_params`` and more.
        """
        views = [{"role": "human", "content": p} for p in prompts]
        self._start(run_id, parent_run_id, views, _tool_names(kwargs.get("invocation_params")), metadata)

    def on_llm_end(
        self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Write the ``succeeded`` row (streamed calls: once, with the assembled text) and emit the event.

        Args:
            response: the result.
            run_id: the LangChain run id.
            parent_run_id: the enclosing run.
            **kwargs: unused.
        """
        pending = self._pending.pop(run_id, None)
        if pending is None:
            return
        text, tools_used, usage = self._read_result(response, pending.request_id)
        if pending.tap is not None:
            text, tapped = pending.tap.after_call(text)
            pending.decisions.extend(tapped)
        latency = (time.perf_counter() - pending.started) * 1000
        entry = self._entry(pending, "succeeded", latency, usage=usage, tools_used=tools_used, response=text)
        # An AuditWriteError (required mode) propagates here, failing the call after on_audit_error ran.
        try:
            self.gateway._write_audit(entry)
        except GatewayError as err:
            self._emit("llm.call.failed", pending, latency, error_type="audit", error_message=str(err))
            raise
        self._emit("llm.call.succeeded", pending, latency, usage=usage, tools_used=tools_used)

    def on_llm_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        """Write the ``failed`` row with the classified error and emit ``llm.call.failed``.

        The provider error stays the one the caller sees: an audit failure here is only reported.

        Args:
            error: what the provider call raised.
            run_id: the LangChain run id.
            parent_run_id: the enclosing run.
            **kwargs: unused.
        """
        pending = self._pending.pop(run_id, None)
        if pending is None:
            return
        error_type, _ = classify_llm_error(error)
        message = truncate_for_audit(f"{type(error).__name__}: {error}", 1500)
        latency = (time.perf_counter() - pending.started) * 1000
        entry = self._entry(pending, "failed", latency, error_type=error_type, error_message=message)
        try:
            self.gateway._write_audit(entry)
        except GatewayError:
            pass  # on_audit_error has the row; the provider error is what the caller must see.
        self._emit("llm.call.failed", pending, latency, error_type=error_type, error_message=message)

    # -- core -----------------------------------------------------------------------------------------------------

    def check(self, *, tools: Sequence[str] = (), metadata: Mapping[str, Any] | None = None) -> list[PolicyDecision]:
        """Run the policy chain for a call of this feature without making one.

        Args:
            tools: tool names the call would offer.
            metadata: call metadata for the rules.

        Returns:
            The decisions.
        """
        return self._decide(tools, {**self.metadata, **(metadata or {})})

    def _decide(self, tools: Sequence[str], metadata: Mapping[str, Any]) -> list[PolicyDecision]:
        context = PolicyContext(
            feature=self.feature,
            route=self.route,
            actor=self.actor,
            tools=tuple(tools),
            metadata=metadata,
            features=self.gateway.features,
        )
        return run_policy_chain(self.gateway.policy, context)

    def _start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        views: list[dict[str, Any]],
        tools: list[str],
        run_metadata: Mapping[str, Any] | None,
        model: str | None = None,
    ) -> None:
        metadata = {
            k: v for k, v in (run_metadata or {}).items() if not k.startswith(_INTERNAL_PREFIXES) and k != "thread_id"
        }
        if run_metadata and "thread_id" in run_metadata:
            metadata["thread_id"] = run_metadata["thread_id"]
        metadata.update(self.metadata)
        started = time.perf_counter()
        decisions = self._decide(tools, metadata)  # `metadata` holds the handler's own already
        self.last_decisions = decisions
        request_id = str(run_id)
        self.request_ids.append(request_id)
        tap = POLICY_TAP.get()
        pending = _Pending(
            request_id=request_id,
            started=started,
            actor=self._actor_audit,
            tenant_id=self.actor.tenant_id if self.actor is not None else None,
            decisions=[d.to_dict() for d in decisions] + (tap.before_call() if tap is not None else []),
            tools_requested=tools,
            views=views,
            parent_run_id=str(parent_run_id) if parent_run_id is not None else None,
            metadata=metadata,
            tap=tap,
            model=model,
        )
        denial = next((d for d in decisions if not d.allowed), None)
        if denial is None:
            if self.gateway.audit_mode == "required":
                # Before the provider call: with a failing sink nothing is streamed, nothing is spent.
                try:
                    self.gateway._write_audit(self._entry(pending, "pending", 0.0))
                except GatewayError as err:
                    self._emit("llm.call.failed", pending, 0.0, error_type="audit", error_message=str(err))
                    raise
            self._pending[run_id] = pending
            self._emit("llm.call.started", pending)
            return
        reason = denial.reason or f"Policy rule {denial.rule!r} denied feature {self.feature!r}."
        entry = self._entry(pending, "blocked", 0.0, error_type="policy", error_message=reason)
        self._emit("llm.policy.blocked", pending, policy_rule=denial.rule, error_type="policy", error_message=reason)
        try:
            self.gateway._write_audit(entry)
        except GatewayError:
            pass  # on_audit_error has the row; the denial is what the caller must see.
        raise GatewayError(reason, decisions)

    def _read_result(self, response: LLMResult, request_id: str) -> tuple[str, list[str], dict[str, Any] | None]:
        texts: list[str] = []
        tools_used: list[str] = []
        usage: dict[str, Any] | None = None
        for batch in response.generations:
            for generation in batch:
                if isinstance(generation, ChatGeneration):
                    message = generation.message
                    content = message.content  # `.text` would walk content blocks even for plain text
                    texts.append(content if isinstance(content, str) else message.text)
                    message.response_metadata.setdefault("gateway_request_id", request_id)
                    if isinstance(message, AIMessage):
                        tools_used.extend(call["name"] for call in message.tool_calls)
                        if message.usage_metadata:
                            usage = dict(message.usage_metadata)
                else:
                    texts.append(generation.text)
        if usage is None and response.llm_output:
            token_usage = response.llm_output.get("token_usage")
            if isinstance(token_usage, Mapping):
                usage = dict(token_usage)
        return "".join(texts), tools_used, usage

    def _entry(
        self,
        pending: _Pending,
        status: AuditStatus,
        latency_ms: float,
        *,
        usage: dict[str, Any] | None = None,
        tools_used: list[str] | None = None,
        response: str | None = None,
        error_type: str | None = None,
        error_message: str | None = None,
    ) -> AuditEntry:
        # Hashing and summarizing happen here, after the call, to keep them off the time-to-first-chunk path.
        request_hash, request_summary = _hash_and_summary(
            self._feature_json, self._model_json, pending.views, pending.tools_requested
        )
        return AuditEntry(
            request_id=pending.request_id,
            feature=self.feature,
            provider=self._provider,
            # A call that reached a provider names the model it was sent to (with fallbacks: the one that answered).
            model=(pending.model or self._model) if status != "blocked" else self._model,
            status=status,
            created_at=self._now(),
            actor=pending.actor,
            tenant_id=pending.tenant_id,
            latency_ms=round(latency_ms, 3),
            usage=usage,
            tools_requested=pending.tools_requested,
            tools_used=tools_used or [],
            policy_decisions=pending.decisions,
            request_hash=request_hash,
            request_summary=request_summary,
            response_summary=truncate_for_audit(response) if response is not None else None,
            error_type=error_type,
            error_message=error_message,
            parent_run_id=pending.parent_run_id,
            metadata=pending.metadata,
        )

    def _now(self) -> datetime:
        return self.gateway.now()

    def _emit(
        self,
        type_: GatewayEventType,
        pending: _Pending,
        latency_ms: float | None = None,
        **fields: Any,
    ) -> None:
        if self.gateway.on_event is None:
            return
        event = GatewayEvent(
            type=type_,
            feature=self.feature,
            provider=self._provider,
            model=self._model,
            request_id=pending.request_id,
            latency_ms=round(latency_ms, 3) if latency_ms is not None else None,
            actor=pending.actor,
            metadata=pending.metadata,
            decisions=pending.decisions,
            tools_requested=pending.tools_requested,
            **fields,
        )
        self.gateway._emit(event)
