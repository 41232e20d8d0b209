"""`GatewayCallbackHandler`: policy before the provider call, one audit row and events after it.

One sync handler with ``run_inline=True``: LangChain then calls it directly on the async path too instead of
hopping to a thread per event (that hop measured 1.6–1.8x per agent turn). Its methods are cheap: build the row,
hand it to the sink, return. ``raise_error=True`` lets a policy denial (and, in required audit mode, a failed
audit write) stop the run. In required mode a ``pending`` row is written before the provider call and completed
after it, so a sink that cannot write fails the call before any token is produced.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from ai_utils._json import RawJSON
from ai_utils.exceptions import ModelOutputError
from ai_utils.gateway._calls import check_images, invoked_model, message_view, non_finite_in, read_result, tool_names
from ai_utils.gateway._secrets import scrub, scrub_error
from ai_utils.gateway._tap import POLICY_TAP, PolicyTap
from ai_utils.gateway.actor import Actor
from ai_utils.gateway.audit import AuditEntry, AuditStatus
from ai_utils.gateway.errors import GatewayError, classify_llm_error
from ai_utils.gateway.events import GatewayEvent, GatewayEventType
from ai_utils.gateway.hashing import _canonical_json, hash_canonical, truncate_for_audit
from ai_utils.gateway.policy import PolicyContext, PolicyDecision, run_policy_chain

if TYPE_CHECKING:
    from ai_utils.gateway._recorder import CallRecorder
    from ai_utils.gateway.policy import PolicyRule
    from ai_utils.gateway.route import Route

__all__ = ["POLICY_TAP", "GatewayCallbackHandler", "PolicyTap"]

# LangChain/LangGraph bookkeeping keys that do not belong in audit metadata.
_INTERNAL_PREFIXES = ("ls_", "lc_", "langgraph_", "checkpoint_", "__")


@functools.lru_cache(maxsize=256)
def _audited_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The run metadata keys an audit row keeps (``thread_id`` last), once per key set: every call asks."""
    kept = tuple(k for k in keys if not k.startswith(_INTERNAL_PREFIXES) and k != "thread_id")
    return (*kept, "thread_id") if "thread_id" in keys else kept


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


class GatewayCallbackHandler(BaseCallbackHandler):
    """Govern every model call of a LangChain run for one gateway feature.

    Get one from `Gateway.callback` (or implicitly from `Gateway.llm`) and attach it with ``callbacks=[...]`` to a
    model, chain, graph or agent run.

    Args:
        feature: the feature.
        recorder: the gateway's audit writer and event emitter (sink, audit mode, hooks, clock).
        routes: the gateway's routes (the feature's route is looked up once, here).
        policy: the policy chain run before every call.
        actor: the actor, already merged with the gateway's ``default_actor``.
        metadata: recorded on every audit row and event.
        parent_run_id: recorded as every row's ``parent_run_id`` (correlating the calls with a run of yours),
            in place of the enclosing LangChain run.

    Attributes:
        feature: the feature.
        route: its route (``None`` for an unknown feature, which the policy then blocks).
        actor: the actor, merged with the gateway's ``default_actor``.
        request_ids: ids of the last 1000 calls this handler has seen, in start order.
        last_decisions: the policy decisions of the latest call.
        last_entry: the final audit row of the latest finished call (``None`` before one finished).
    """

    raise_error: bool = True
    run_inline: bool = True
    # Chain, agent, retriever, retry and custom events carry nothing the gateway needs.
    ignore_chain: bool = True
    ignore_agent: bool = True
    ignore_retriever: bool = True
    ignore_retry: bool = True
    ignore_custom_event: bool = True

    def __init__(
        self,
        feature: str,
        *,
        recorder: CallRecorder,
        routes: Mapping[str, Route],
        policy: Sequence[PolicyRule],
        actor: Actor | None = None,
        metadata: Mapping[str, Any] | None = None,
        parent_run_id: str | None = None,
    ) -> None:
        self.feature = feature
        self.parent_run_id = parent_run_id
        self.last_entry: AuditEntry | None = None
        self.route: Route | None = routes.get(feature)
        self.recorder = recorder
        self.policy: tuple[PolicyRule, ...] = tuple(policy)
        self._features = frozenset(routes)
        self.actor = actor
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.request_ids: deque[str] = deque(maxlen=1000)
        self.last_decisions: list[PolicyDecision] = []
        self._pending: dict[UUID, _Pending] = {}
        self._actor_audit = actor.to_audit() if actor is not None else None
        # The route model's API keys (set by the gateway that built it): never quoted in a failed row or event.
        self.secrets: tuple[str, ...] = ()

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
        views = [message_view(m) for batch in messages for m in batch]
        params = kwargs.get("invocation_params")
        self._start(run_id, parent_run_id, views, tool_names(params), metadata, invoked_model(params))

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any) -> None:
        """Same as `on_chat_model_start`, for completion (non-chat) models: each prompt text is a human message."""
        views = [{"role": "human", "content": p} for p in prompts]
        tools = tool_names(kwargs.get("invocation_params"))
        self._start(run_id, kwargs.get("parent_run_id"), views, tools, kwargs.get("metadata"))

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
        text, tools_used, usage = read_result(response, pending.request_id)
        if (where := non_finite_in(response, usage)) is not None:
            self._fail_broken_reply(pending, tools_used, f"a non-finite number (NaN or Infinity) in {where}")
        if (where := check_images(response)) is not None:
            self._fail_broken_reply(pending, tools_used, f"{where} whose bytes are not a PNG, JPEG, GIF or WebP image")
        if pending.tap is not None:
            text, tapped = pending.tap.after_call(text)
            pending.decisions.extend(tapped)
        latency = (time.perf_counter() - pending.started) * 1000
        entry = self._entry(pending, "succeeded", latency, usage=usage, tools_used=tools_used, response=text)
        self.last_entry = entry
        # An AuditWriteError (required mode) propagates here, failing the call after on_audit_error ran.
        try:
            self.recorder.write(entry)
        except GatewayError as err:
            self._emit("llm.call.failed", pending, latency, error_type="audit", error_message=str(err))
            raise
        if self.recorder.on_event is not None:  # no event to build for nobody (two calls a model call)
            self._emit("llm.call.succeeded", pending, latency, usage=usage, tools_used=tools_used)

    def _fail_broken_reply(self, pending: _Pending, tools_used: list[str], problem: str) -> None:
        """A reply with ``NaN``/``Infinity`` or a fake image is no answer: a ``failed`` row (without its usage).

        `ModelOutputError` is raised from ``on_llm_end`` (``raise_error=True``), so no caller ever reads the reply.
        """
        message = f"The provider's reply carries {problem}; the reply is broken and was not used."
        latency = (time.perf_counter() - pending.started) * 1000
        entry = self._entry(
            pending, "failed", latency, tools_used=tools_used, error_type="provider", error_message=message
        )
        self.last_entry = entry
        try:
            self.recorder.write(entry)
        except GatewayError:
            pass  # on_audit_error has the row; the broken reply is what the caller must see.
        self._emit("llm.call.failed", pending, latency, error_type="provider", error_message=message)
        raise ModelOutputError(message, errors=message, attempts=1)

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
        # In place, before LangChain re-raises it: the caller's exception (and a logged traceback) loses the key too.
        scrub_error(error, self.secrets)
        error_type, _ = classify_llm_error(error)
        message = truncate_for_audit(scrub(f"{type(error).__name__}: {error}", self.secrets), 1500)
        latency = (time.perf_counter() - pending.started) * 1000
        entry = self._entry(pending, "failed", latency, error_type=error_type, error_message=message)
        self.last_entry = entry
        try:
            self.recorder.write(entry)
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
            features=self._features,
        )
        return run_policy_chain(self.policy, context)

    def _start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        views: list[dict[str, Any]],
        tools: list[str],
        run_metadata: Mapping[str, Any] | None,
        model: str | None = None,
    ) -> None:
        metadata = {k: run_metadata[k] for k in _audited_keys(tuple(run_metadata))} if run_metadata else {}
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
            parent_run_id=self.parent_run_id or (str(parent_run_id) if parent_run_id is not None else None),
            metadata=metadata,
            tap=tap,
            model=model,
        )
        recorder = self.recorder
        if all(d.allowed for d in decisions):
            if recorder.audit_mode == "required":
                # Before the provider call: with a failing sink nothing is streamed, nothing is spent.
                try:
                    recorder.write(self._entry(pending, "pending", 0.0))
                except GatewayError as err:
                    self._emit("llm.call.failed", pending, 0.0, error_type="audit", error_message=str(err))
                    raise
            self._pending[run_id] = pending
            if recorder.on_event is not None:
                self._emit("llm.call.started", pending)
            return
        denial = next(d for d in decisions if not d.allowed)
        reason = denial.reason or f"Policy rule {denial.rule!r} denied feature {self.feature!r}."
        entry = self._entry(pending, "blocked", 0.0, error_type="policy", error_message=reason)
        self._emit("llm.policy.blocked", pending, policy_rule=denial.rule, error_type="policy", error_message=reason)
        try:
            self.recorder.write(entry)
        except GatewayError:
            pass  # on_audit_error has the row; the denial is what the caller must see.
        raise GatewayError(reason, decisions)

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
        # The messages, the bulk of the hashed value, are serialized once: hashed embedded as is, and summarized.
        messages = _canonical_json(pending.views)
        route_model = self._model
        request_hash = hash_canonical(
            {
                "feature": self.feature,
                "model": route_model,
                "messages": RawJSON(messages),
                "tools": pending.tools_requested,
            }
        )
        request_summary = truncate_for_audit(messages)
        return AuditEntry(
            request_id=pending.request_id,
            feature=self.feature,
            provider=self._provider,
            # A call that reached a provider names the model it was sent to (with fallbacks: the one that answered).
            model=(pending.model or route_model) if status != "blocked" else route_model,
            status=status,
            created_at=self.recorder.now(),
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

    def _emit(
        self,
        type_: GatewayEventType,
        pending: _Pending,
        latency_ms: float | None = None,
        **fields: Any,
    ) -> None:
        if not self.recorder.listening:
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
        self.recorder.emit(event)
