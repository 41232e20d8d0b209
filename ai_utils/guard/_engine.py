"""`Guardrails`: one ordered policy engine as a single `create_agent` middleware (the model-call half here).

Phases and where they run (no extra graph nodes, so no extra checkpoint steps per turn):

- before the run stores anything: the user's input (`ai_utils.guard._input`, called by the run path and sessions).
- ``wrap_model_call``, before the call: messages the engine has not seen yet (found by walking back from the
  newest one to the first already-scanned id, so a turn costs O(new messages), not O(history)) are scanned:
  user messages as ``input``, tool results as ``tool_output``, anything else as ``context``; then the host
  policies. Redacted copies go to the model and, by id, back into the thread state.
- the call itself runs with the gateway's `POLICY_TAP` set (decisions into the audit row) and, when buffering,
  with LangGraph's ``nostream`` tag, so no token reaches a stream before the output policies ran; the model
  node's finished (redacted) message is streamed instead.
- ``wrap_model_call``, after the call: the answer's text and reasoning as ``output`` (cut to
  ``max_final_output_chars``), then the host policies.
- ``wrap_tool_call`` (`ai_utils.guard._tool_calls`): arguments, approval or block, the tool at most once, its result.

In ``mode="audit"`` every step decides and reports as in ``"enforce"``, and hands on what it was given.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    HumanInTheLoopMiddleware,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.constants import TAG_NOSTREAM
from langgraph.types import Command

from ai_utils.exceptions import UserError
from ai_utils.gateway.callbacks import POLICY_TAP
from ai_utils.guard._host import Approver, HostPolicies, HostPolicy, Outcome
from ai_utils.guard._input import InputRedaction, phase_of
from ai_utils.guard._rules import (
    ContentRule,
    GuardMode,
    GuardrailDecision,
    OnDecision,
    Phase,
    PolicyPack,
    StreamingMode,
    compile_rules,
)
from ai_utils.guard._scan import ERROR_POLICY, TextPolicies, decision
from ai_utils.guard._settings import Settings, check_stricter, run_settings
from ai_utils.guard._tool_calls import META_KEY, SCAN_LIMIT_POLICY, ToolCallPolicies
from ai_utils.guard._walk import ScanLimitError, check_bounds

__all__ = ["Guardrails"]

_MISSING: Any = object()


class _CallTap:
    """The gateway `PolicyTap` of one model call; remembers the output scan so the middleware reuses it."""

    __slots__ = ("_before", "_enforce", "_outputs", "_policies")

    def __init__(self, policies: TextPolicies, before: list[GuardrailDecision], enforce: bool) -> None:
        self._policies = policies
        self._before = before
        self._enforce = enforce
        self._outputs: dict[str, tuple[str, list[GuardrailDecision]]] = {}

    def before_call(self) -> list[dict[str, Any]]:
        return [dict(d) for d in self._before]

    def output(self, text: str) -> tuple[str, list[GuardrailDecision]]:
        cached = self._outputs.get(text)
        if cached is None:
            new, found = self._policies.scan(text, "output")
            new, cut = self._policies.cut_output(new)
            cached = self._outputs[text] = (new, [*found, *cut])
        return cached

    def after_call(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        new, found = self.output(text)
        return (new if self._enforce else text), [dict(d) for d in found]


@dataclass(slots=True)
class _Prepared:
    request: ModelRequest[Any]
    settings: Settings
    emit: list[GuardrailDecision]
    tap: _CallTap | None = None  # made by `_seal`, once the decisions before the call are all known
    tail: list[GuardrailDecision] = field(default_factory=list)  # the decisions of the tool calls just answered
    # index in the request's messages -> the redacted copy the model gets (enforce only)
    replacements: dict[int, BaseMessage] = field(default_factory=dict)
    checks: list[tuple[int, Phase]] = field(default_factory=list)  # messages the host policies look at
    block: tuple[GuardrailDecision, str] | None = None  # an input block and the text that ends the turn
    persist: list[BaseMessage] = field(default_factory=list)
    blocked: ModelResponse[Any] | None = None


@dataclass(slots=True)
class _Answer:
    result: list[BaseMessage]
    structured: Any
    found: list[GuardrailDecision]
    changed: bool
    final: int | None  # index in ``result`` of the answer the host output policies look at


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


class Guardrails(InputRedaction, ToolCallPolicies, AgentMiddleware[AgentState[Any], Any, Any], Sequence["Guardrails"]):
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
                settings, rules, host, on_decision, approve, max_tool_output_chars = _merged(
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

    # --- before the model call -------------------------------------------------------------------------------

    def _prepare(self, request: ModelRequest[Any], settings: Settings) -> _Prepared:
        messages = request.messages
        found: list[GuardrailDecision] = []
        prepared = _Prepared(request, settings, found)
        # The current turn's own messages (after the last answer): decisions taken before they were stored count here.
        turn = next((i + 1 for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), 0)
        try:
            for index in range(len(messages) - 1, -1, -1):
                message = messages[index]
                cached = self._seen.get(message.id, _MISSING) if message.id is not None else _MISSING
                if cached is None:
                    break  # scanned and clean: everything older was scanned before it
                if cached is not _MISSING:
                    if settings.enforce and cached.content != message.content:
                        prepared.replacements[index] = cached
                    continue
                phase = phase_of(message)
                before = self.remembered(message) if index >= turn and isinstance(message, HumanMessage) else []
                content, more = self._policies.content(message.content, phase)
                kwargs, reasoning = self._policies.extras(message.additional_kwargs, phase)
                found.extend([*before, *more, *reasoning])
                if settings.enforce and (more or reasoning):
                    update: dict[str, Any] = {"content": content}
                    if kwargs is not None:
                        update["additional_kwargs"] = kwargs
                    copy = message.model_copy(update=update)
                    prepared.replacements[index] = copy
                    self._remember(message.id, copy)
                else:
                    self._remember(message.id, None)
                if self._host and phase != "tool_output":
                    prepared.checks.append((index, phase))
        except Exception:
            found[:] = [decision(ERROR_POLICY, "input", "block", "high")]
            if settings.enforce:
                prepared.block = (found[0], f"[BLOCKED:{ERROR_POLICY}]")
            return prepared
        tail: list[GuardrailDecision] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            carried = message.response_metadata.get(META_KEY) or self._carry.pop(message.tool_call_id, None) or ()
            tail[:0] = carried
        prepared.tail = tail
        block = next((d for d in found if d["action"] == "block" and d["phase"] == "input"), None)
        if block is not None and settings.enforce:
            rule = next((r for r in self._policies.rules if r.id == block["policy_id"]), None)
            prepared.block = (block, rule.replacement if rule is not None else f"[BLOCKED:{block['policy_id']}]")
        return prepared

    def _host_message(self, prepared: _Prepared, index: int, phase: Phase, outcome: Outcome) -> None:
        """Apply the host policies' answer on one message of the request."""
        prepared.emit.extend(outcome.decisions)
        if not prepared.settings.enforce:
            return
        if outcome.block is not None and phase == "input":
            if prepared.block is None:
                prepared.block = (outcome.block, f"[BLOCKED:{outcome.block['policy_id']}]")
            return
        if outcome.block is None and not outcome.changed:
            return
        current = prepared.replacements.get(index, prepared.request.messages[index])
        content = f"[BLOCKED:{outcome.block['policy_id']}]" if outcome.block is not None else outcome.value
        copy = current.model_copy(update={"content": content})
        prepared.replacements[index] = copy
        self._remember(copy.id, copy)

    def _host_text(self, prepared: _Prepared, index: int) -> str:
        return _text(prepared.replacements.get(index, prepared.request.messages[index]))

    def _seal(self, prepared: _Prepared) -> None:
        """The call's tap, the request the model gets, the copies to persist, and the answer of a blocked turn."""
        prepared.tap = _CallTap(self._policies, [*prepared.tail, *prepared.emit], prepared.settings.enforce)
        request = prepared.request
        if prepared.replacements:
            in_state = {m.id for m in request.state.get("messages", ())}
            prepared.persist = [m for m in prepared.replacements.values() if m.id in in_state]
            new: list[Any] = list(request.messages)
            for index, replacement in prepared.replacements.items():
                new[index] = replacement
            prepared.request = request.override(messages=new)
        if prepared.block is not None:
            prepared.blocked = ModelResponse(result=[AIMessage(prepared.block[1])], structured_response=None)

    @contextlib.contextmanager
    def _call_scope(self, prepared: _Prepared) -> Iterator[None]:
        assert prepared.tap is not None
        token = POLICY_TAP.set(prepared.tap)
        config_token = None
        config = var_child_runnable_config.get() if prepared.settings.buffer else None
        if config is not None:
            # The model run gets LangGraph's `nostream` tag: its tokens skip the messages stream, and the model
            # node's finished (redacted) message is streamed when the node ends.
            config_token = var_child_runnable_config.set({**config, "tags": [*config.get("tags", ()), TAG_NOSTREAM]})
        try:
            yield
        finally:
            if config_token is not None:
                var_child_runnable_config.reset(config_token)
            POLICY_TAP.reset(token)

    # --- after the model call --------------------------------------------------------------------------------

    def _scan_answer(self, message: AIMessage, tap: _CallTap, structured: bool) -> tuple[AIMessage, list[Any]]:
        update: dict[str, Any] = {}
        found: list[GuardrailDecision] = []
        if isinstance(message.content, str):
            content, more = tap.output(message.content)
            if more:
                update["content"], found = content, more
        else:
            content, more = self._policies.content(message.content, "output")
            content, cut = self._policies.cut_output(content)
            if more or cut:
                update["content"], found = content, [*more, *cut]
        kwargs, reasoning = self._policies.extras(message.additional_kwargs, "output")
        if kwargs is not None:
            update["additional_kwargs"] = kwargs
            found.extend(reasoning)
        if structured and message.tool_calls:
            # With a structured-output strategy the answer is the output tool's arguments.
            calls: list[Any] = []
            in_args: list[GuardrailDecision] = []
            for call in message.tool_calls:
                check_bounds(call["args"])
                args, more = self._policies.args(call["args"], None, "output")
                calls.append({**call, "args": args})
                in_args.extend(more)
            if in_args:
                update["tool_calls"] = calls
                found.extend(in_args)
        return (message.model_copy(update=update) if update else message), found

    def _answer(self, response: ModelResponse[Any], prepared: _Prepared) -> _Answer:
        result: list[BaseMessage] = []
        found: list[GuardrailDecision] = []
        structured = response.structured_response
        final: int | None = None
        try:
            for message in response.result:
                if isinstance(message, AIMessage):
                    if message.id is None:
                        message.id = f"lc_{uuid.uuid4()}"  # this call's own message: an id lets later calls skip it
                    assert prepared.tap is not None
                    message, more = self._scan_answer(message, prepared.tap, structured is not None)
                    found.extend(more)
                    if not message.tool_calls or structured is not None:
                        final = len(result)
                elif structured is not None and isinstance(message, ToolMessage):
                    content, more = self._policies.content(message.content, "output")
                    message = message.model_copy(update={"content": content}) if more else message
                self._remember(message.id, None)
                result.append(message)
            if structured is not None:
                check_bounds(structured)
                structured, more = self._policies.structured(structured)
                found.extend(more)
        except Exception as error:
            policy = SCAN_LIMIT_POLICY if isinstance(error, ScanLimitError) else ERROR_POLICY
            event = decision(policy, "output", "block", "high")
            if isinstance(error, ScanLimitError):
                event["reason"] = "scan_limit"
            blocked = AIMessage(f"[BLOCKED:{policy}]", id=f"lc_{uuid.uuid4()}")
            self._remember(blocked.id, None)
            return _Answer([blocked], None, [event], True, None)
        # The same secret in the text, the reasoning, an output call and its receipt: one decision.
        found = list({tuple(sorted(d.items())): d for d in found}.values())
        return _Answer(result, structured, found, bool(found), final)

    def _host_answer(self, answer: _Answer, prepared: _Prepared, outcome: Outcome) -> None:
        answer.found.extend(outcome.decisions)
        if not prepared.settings.enforce or answer.final is None or (outcome.block is None and not outcome.changed):
            return
        message = answer.result[answer.final]
        content = f"[BLOCKED:{outcome.block['policy_id']}]" if outcome.block is not None else outcome.value
        answer.result[answer.final] = message.model_copy(update={"content": content})
        answer.changed = True

    def _package(self, response: ModelResponse[Any], answer: _Answer, prepared: _Prepared) -> Any:
        prepared.emit.extend(answer.found)
        out: ModelResponse[Any] = response
        if answer.changed and prepared.settings.enforce:
            out = ModelResponse(result=answer.result, structured_response=answer.structured)
        if prepared.persist:
            return ExtendedModelResponse(model_response=out, command=Command(update={"messages": prepared.persist}))
        return out

    def _blocked_result(self, prepared: _Prepared) -> Any:
        assert prepared.blocked is not None
        if prepared.persist:
            command: Command[Any] = Command(update={"messages": prepared.persist})
            return ExtendedModelResponse(model_response=prepared.blocked, command=command)
        return prepared.blocked

    # --- the hooks -------------------------------------------------------------------------------------------

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> Any:
        """Scan new messages, call the model (tapped, buffered when asked), scan its answer."""
        settings = self._settings()
        prepared = self._prepare(request, settings)
        for index, phase in prepared.checks:
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
        if self._host and answer.final is not None:
            text = _text(answer.result[answer.final])
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
        if self._host and answer.final is not None:
            text = _text(answer.result[answer.final])
            outcome = await self._host.arun("output", text, None, strict=settings.strict)
            self._host_answer(answer, prepared, outcome)
        result = self._package(response, answer, prepared)
        await self._aemit(prepared.emit)
        return result


def _check_limit(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{name} must be a positive int, got {value!r}.")


def _merged(
    baseline: Guardrails,
    settings: Settings,
    rules: tuple[Any, ...],
    host: HostPolicies,
    on_decision: OnDecision | None,
    approve: Approver | None,
    max_tool_output_chars: int,
) -> tuple[Settings, tuple[Any, ...], HostPolicies, OnDecision | None, Approver | None, int]:
    """``stricter_than=baseline``: its rules, host policies, reporting, approval and bounds kept, ours added on top."""
    base = baseline._base
    if approve is not None and baseline._approve is not None and approve is not baseline._approve:
        raise UserError(
            "approve= differs from the approve= of the guardrails it must be stricter than; leave it out to keep "
            "theirs."
        )
    if approve is not None and baseline._approve is None and not base.strict:
        raise UserError(
            "approve= would answer in code the approvals the guardrails it must be stricter than ask a person for; "
            "leave it out."
        )
    mine = {rule.id for rule in rules}
    merged_rules = (*(r for r in baseline._policies.rules if r.id not in mine), *rules)
    limits = [v for v in (base.max_final_output_chars, settings.max_final_output_chars) if v is not None]
    merged = Settings(
        pack=settings.pack,
        strict=settings.strict or base.strict,
        enforce=settings.enforce,
        streaming="buffer" if "buffer" in (settings.streaming, base.streaming) else "audit",
        max_final_output_chars=min(limits) if limits else None,
    )
    theirs = baseline.on_decision
    report = on_decision
    if theirs is not None and on_decision is not None and theirs is not on_decision:
        report = _both(theirs, on_decision)
    elif theirs is not None:
        report = theirs
    policies = HostPolicies(
        [*baseline._host.callables, *(p for p in host.callables if p not in baseline._host.callables)]
    )
    tool_chars = min(max_tool_output_chars, baseline.max_tool_output_chars)
    return merged, merged_rules, policies, report, approve or baseline._approve, tool_chars


def _both(first: OnDecision, second: OnDecision) -> OnDecision:
    """Report to the baseline's ``on_decision`` and then ours (awaiting either when it is async)."""

    def report(event: GuardrailDecision) -> Any:
        one = first(dict(event))  # type: ignore[arg-type]
        two = second(dict(event))  # type: ignore[arg-type]
        awaitables = [r for r in (one, two) if hasattr(r, "__await__")]
        if not awaitables:
            return None

        async def wait() -> None:
            for pending in awaitables:
                await pending

        return wait()

    return report
