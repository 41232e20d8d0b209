"""The model-call half of `Guardrails` (a mixin): the stages around one model call, sync and async alike.

Before the call (`ModelCallPolicies._prepare`): messages the engine has not seen yet (found by walking back from the
newest one to the first already-scanned id, so a turn costs O(new messages), not O(history)) are scanned: user
messages as ``input`` (with the decisions taken before they were stored, `ai_utils.guard._input`), tool results as
``tool_output``, anything else as ``context``; then the host policies (`_host_message`). Redacted copies go to the
model and, by id, back into the thread state (`_seal`). The call runs with the gateway's `POLICY_TAP` set and, when
buffering, LangGraph's ``nostream`` tag (`_call_scope`). After it: the answer's text and reasoning as ``output``,
cut to ``max_final_output_chars`` (`_answer`), then the host policies (`_host_answer`). In ``mode="audit"`` every
stage decides and reports, and the response handed on is the one the model gave.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.constants import TAG_NOSTREAM
from langgraph.types import Command

from ai_utils.gateway.callbacks import POLICY_TAP
from ai_utils.guard._host import Outcome
from ai_utils.guard._input import InputRedaction, phase_of
from ai_utils.guard._rules import GuardrailDecision, Phase
from ai_utils.guard._scan import ERROR_POLICY, TextPolicies, decision
from ai_utils.guard._settings import Settings
from ai_utils.guard._tool_calls import META_KEY, SCAN_LIMIT_POLICY, ToolCallPolicies
from ai_utils.guard._walk import ScanLimitError, check_bounds

__all__ = ["ModelCallPolicies", "message_text"]

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
    stopped: bool = False  # an input was blocked (also in audit mode, where nothing acts): later policies skip it
    persist: list[BaseMessage] = field(default_factory=list)
    blocked: ModelResponse[Any] | None = None


@dataclass(slots=True)
class _Answer:
    result: list[BaseMessage]
    structured: Any
    found: list[GuardrailDecision]
    changed: bool
    final: int | None  # index in ``result`` of the answer the host output policies look at


def message_text(message: BaseMessage) -> str:
    """A message's text (its content when that is a str: `.text` would walk content blocks)."""
    return message.content if isinstance(message.content, str) else message.text


class ModelCallPolicies(InputRedaction, ToolCallPolicies):
    """The stages of one model call, shared by `Guardrails`' ``wrap_model_call`` and ``awrap_model_call``."""

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
                if self._host.policies and phase != "tool_output" and index >= turn:
                    # The turn's own input; tool results had theirs when the tool ran, and earlier turns' messages
                    # (rescanned after a restart) had theirs when they were new.
                    prepared.checks.append((index, phase))
        except Exception:
            found[:] = [decision(ERROR_POLICY, "input", "block", "high")]
            prepared.stopped = True
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
        prepared.stopped = block is not None
        if block is not None and settings.enforce:
            rule = next((r for r in self._policies.rules if r.id == block["policy_id"]), None)
            prepared.block = (block, rule.replacement if rule is not None else f"[BLOCKED:{block['policy_id']}]")
        return prepared

    def _host_message(self, prepared: _Prepared, index: int, phase: Phase, outcome: Outcome) -> None:
        """Apply the host policies' answer on one message of the request."""
        prepared.emit.extend(outcome.decisions)
        prepared.stopped = prepared.stopped or (outcome.block is not None and phase == "input")
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
        return message_text(prepared.replacements.get(index, prepared.request.messages[index]))

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
        if len(found) > 1:  # the same secret in the text, the reasoning, an output call and its receipt: one decision
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
