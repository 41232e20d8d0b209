"""`Guardrails`: one ordered policy engine as a single `create_agent` middleware (its settings and hooks here).

Phases and where they run (no extra graph nodes, so no extra checkpoint steps per turn):

- before the run stores anything: the user's input (`ai_utils.guard._input`, called by the run path and sessions).
- ``wrap_model_call``: new messages before the call, the answer after it (`ai_utils.guard._model_call`), with the
  gateway's `POLICY_TAP` set (decisions into the audit row) and, when buffering, LangGraph's ``nostream`` tag, so no
  token reaches a stream before the output policies ran (the model node's finished, redacted message is streamed).
- ``wrap_tool_call`` (`ai_utils.guard._tool_calls`): arguments, approval or block, the tool at most once, its result.

Built-in policies run first, then the host ``policies`` (`ai_utils.guard._host`), each phase in one place for the
sync and async hooks. In ``mode="audit"`` every step decides and reports as in ``"enforce"``, and hands on what it
was given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, overload

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    HumanInTheLoopMiddleware,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import BaseMessage

from ai_utils.exceptions import UserError
from ai_utils.guard._host import Approver, HostPolicies, HostPolicy
from ai_utils.guard._model_call import ModelCallPolicies, message_text
from ai_utils.guard._rules import (
    ContentRule,
    GuardMode,
    GuardrailDecision,
    OnDecision,
    PolicyPack,
    StreamingMode,
    compile_rules,
)
from ai_utils.guard._scan import TextPolicies
from ai_utils.guard._settings import Settings, check_stricter, merge_stricter, run_settings

__all__ = ["Guardrails"]


class Guardrails(ModelCallPolicies, AgentMiddleware[AgentState[Any], Any, Any], Sequence["Guardrails"]):
    """The guardrails middleware; build it with `guardrails(...)`.

    It is also a one-item `Sequence` of itself (for type checkers too), so ``middleware=guardrails("standard")``
    and ``middleware=[guardrails("standard"), other]`` both work.
    """

    def __init__(
        self,
        *,
        policy_pack: PolicyPack,
        content_rules: Sequence[ContentRule] | Sequence[Mapping[str, Any]],
        on_decision: OnDecision | None,
        max_tool_output_chars: int,
        streaming: StreamingMode,
        mode: GuardMode = "enforce",
        max_final_output_chars: int | None = None,
        policies: Sequence[HostPolicy] = (),
        approve: Approver | None = None,
        stricter_than: Guardrails | str | None = None,
    ) -> None:
        super().__init__()
        if policy_pack not in ("standard", "strict", "custom"):
            raise UserError(f"policy_pack must be 'standard', 'strict' or 'custom', got {policy_pack!r}.")
        rules = compile_rules(content_rules)
        if policy_pack == "custom" and not rules:
            raise UserError("policy_pack='custom' adds content_rules to the standard pack; pass at least one rule.")
        if policy_pack != "custom" and rules:
            raise UserError(
                f"content_rules need policy_pack='custom' (got {policy_pack!r}); pass policy_pack='custom'."
            )
        if on_decision is not None and not callable(on_decision):
            raise UserError(f"on_decision must be a function of one decision dict, got {on_decision!r}.")
        _check_limit("max_tool_output_chars", max_tool_output_chars)
        if max_final_output_chars is not None:
            _check_limit("max_final_output_chars", max_final_output_chars)
        if streaming not in ("audit", "buffer"):
            raise UserError(f"streaming must be 'audit' or 'buffer', got {streaming!r}.")
        if mode not in ("enforce", "audit"):
            raise UserError(f"mode must be 'enforce' or 'audit', got {mode!r}.")
        if approve is not None and not callable(approve):
            raise UserError(f"approve must be a function (tool_call) -> bool, got {approve!r}.")
        host = HostPolicies(policies)
        strict = policy_pack == "strict"
        settings = Settings(
            pack=policy_pack,
            strict=strict,
            enforce=mode == "enforce",
            streaming="buffer" if strict else streaming,
            max_final_output_chars=max_final_output_chars,
        )
        if stricter_than is not None:
            if not isinstance(stricter_than, Guardrails | str):
                raise UserError(
                    f"stricter_than must be a guardrails(...) instance or 'standard'/'strict', got {stricter_than!r}."
                )
            check_stricter(settings, rules, stricter_than)
            if isinstance(stricter_than, Guardrails):
                settings, rules, host, on_decision, approve, max_tool_output_chars = merge_stricter(
                    stricter_than, settings, rules, host, on_decision, approve, max_tool_output_chars
                )
        self.policy_pack = policy_pack
        self.mode: GuardMode = mode
        self.on_decision = on_decision
        self.streaming: StreamingMode = settings.streaming
        self._base = settings
        self._tight = settings.tightened()
        self._policies = TextPolicies(rules, max_tool_output_chars, settings.max_final_output_chars)
        self._tool_input_rules = self._policies.has_rules("tool_input")
        self._host = host
        self._approve = approve
        # message id -> None (scanned, clean) or its redacted copy (re-applied if the state still has the original).
        self._seen: dict[str, BaseMessage | None] = {}
        self._approvers: dict[str, HumanInTheLoopMiddleware] = {}
        self._carry: dict[str, list[GuardrailDecision]] = {}
        self._memo: dict[str, list[GuardrailDecision]] = {}

    @property
    def name(self) -> str:
        """Middleware name (unique in the stack)."""
        return "ai_utils.Guardrails"

    @property
    def max_tool_output_chars(self) -> int:
        """Tool results are cut to this many characters before the model sees them."""
        return self._policies.max_tool_output_chars

    @property
    def max_final_output_chars(self) -> int | None:
        """Answers are cut to this many characters (``None``: not cut)."""
        return self._policies.max_output_chars

    def __iter__(self) -> Iterator[Guardrails]:
        yield self

    def __len__(self) -> int:
        return 1

    @overload
    def __getitem__(self, index: int) -> Guardrails: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Guardrails]: ...

    def __getitem__(self, index: int | slice) -> Guardrails | Sequence[Guardrails]:
        return [self][index]

    def _settings(self) -> Settings:
        """This run's settings (a run may tighten the pack through its config; `UserError` if it loosens it)."""
        return run_settings(self._base, self._tight)

    # --- the hooks -------------------------------------------------------------------------------------------

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> Any:
        """Scan new messages, call the model (tapped, buffered when asked), scan its answer."""
        settings = self._settings()
        prepared = self._prepare(request, settings)
        for index, phase in prepared.checks:
            if prepared.stopped:
                break
            outcome = self._host.run(phase, self._host_text(prepared, index), None, strict=settings.strict)
            self._host_message(prepared, index, phase, outcome)
        self._seal(prepared)
        self._emit(prepared.emit)
        if prepared.blocked is not None:
            return self._blocked_result(prepared)
        prepared.emit = []
        with self._call_scope(prepared):
            response = handler(prepared.request)
        answer = self._answer(response, prepared)
        if self._host.policies and answer.final is not None:
            text = message_text(answer.result[answer.final])
            self._host_answer(answer, prepared, self._host.run("output", text, None, strict=settings.strict))
        result = self._package(response, answer, prepared)
        self._emit(prepared.emit)
        return result

    # LangChain wraps every wrap_* hook in langsmith's `traceable`; for an `async def` hook that wrapper hops to a
    # thread twice per call even with tracing off (about +20% on a zero-latency agent turn, bench_governance.py).
    # A plain method that returns the coroutine gets the sync wrapper, which does not hop. With tracing on, this
    # hook's own span closes when it hands the coroutine over; the model and tool runs are traced as usual.
    def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> Coroutine[Any, Any, Any]:
        """Async twin of `wrap_model_call`."""
        return self._awrap_model_call(request, handler)

    async def _awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> Any:
        settings = self._settings()
        prepared = self._prepare(request, settings)
        for index, phase in prepared.checks:
            if prepared.stopped:
                break
            outcome = await self._host.arun(phase, self._host_text(prepared, index), None, strict=settings.strict)
            self._host_message(prepared, index, phase, outcome)
        self._seal(prepared)
        await self._aemit(prepared.emit)
        if prepared.blocked is not None:
            return self._blocked_result(prepared)
        prepared.emit = []
        with self._call_scope(prepared):
            response = await handler(prepared.request)
        answer = self._answer(response, prepared)
        if self._host.policies and answer.final is not None:
            text = message_text(answer.result[answer.final])
            outcome = await self._host.arun("output", text, None, strict=settings.strict)
            self._host_answer(answer, prepared, outcome)
        result = self._package(response, answer, prepared)
        await self._aemit(prepared.emit)
        return result


def _check_limit(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{name} must be a positive int, got {value!r}.")
