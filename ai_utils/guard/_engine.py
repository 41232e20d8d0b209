"""`Guardrails`: one ordered policy engine as a single `create_agent` middleware (the model-call half here).

Phases and where they run (no extra graph nodes, so no extra checkpoint steps per turn):

- ``wrap_model_call``, before the call: messages the engine has not seen yet (found by walking back from the
  newest one to the first already-scanned id, so a turn costs O(new messages), not O(history)) are scanned:
  user messages as ``input``, tool results as ``tool_output``, anything else as ``context``. Redacted copies go to
  the model and, by id, back into the thread state.
- the call itself runs with the gateway's `POLICY_TAP` set (decisions into the audit row) and, when buffering,
  with LangGraph's ``nostream`` tag, so no token reaches a stream before the output policies ran; the model
  node's finished (redacted) message is streamed instead.
- ``wrap_model_call``, after the call: the answer's text as ``output``.
- ``wrap_tool_call``: ``tool_input`` rules, schema validation, private-network destinations, then approval or a
  block for destructive tools (LangChain's per-call `HumanInTheLoopMiddleware` interrupt, so the usual interrupt
  chunk and ``decision=`` resume apply), the tool (at most once), then ``tool_output``.
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
from ai_utils.guard._rules import (
    ContentRule,
    GuardrailDecision,
    OnDecision,
    Phase,
    PolicyPack,
    StreamingMode,
    compile_rules,
)
from ai_utils.guard._scan import ERROR_POLICY, TextPolicies, decision
from ai_utils.guard._tool_calls import META_KEY, ToolCallPolicies

__all__ = ["Guardrails"]

_MISSING: Any = object()


class _CallTap:
    """The gateway `PolicyTap` of one model call; remembers the output scan so the middleware reuses it."""

    __slots__ = ("_before", "_outputs", "_policies")

    def __init__(self, policies: TextPolicies, before: list[GuardrailDecision]) -> None:
        self._policies = policies
        self._before = before
        self._outputs: dict[str, tuple[str, list[GuardrailDecision]]] = {}

    def before_call(self) -> list[dict[str, Any]]:
        return [dict(d) for d in self._before]

    def output(self, text: str) -> tuple[str, list[GuardrailDecision]]:
        cached = self._outputs.get(text)
        if cached is None:
            cached = self._outputs[text] = self._policies.scan(text, "output")
        return cached

    def after_call(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        new, found = self.output(text)
        return new, [dict(d) for d in found]


@dataclass(slots=True)
class _Prepared:
    request: ModelRequest[Any]
    tap: _CallTap
    emit: list[GuardrailDecision]
    persist: list[BaseMessage] = field(default_factory=list)
    blocked: ModelResponse[Any] | None = None


def _phase_of(message: BaseMessage) -> Phase:
    if isinstance(message, HumanMessage):
        return "input"
    if isinstance(message, ToolMessage):
        return "tool_output"
    return "context"


class Guardrails(ToolCallPolicies, AgentMiddleware[AgentState[Any], Any, Any], Sequence["Guardrails"]):
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
        if isinstance(max_tool_output_chars, bool) or not isinstance(max_tool_output_chars, int):
            raise UserError(f"max_tool_output_chars must be a positive int, got {max_tool_output_chars!r}.")
        if max_tool_output_chars < 1:
            raise UserError(f"max_tool_output_chars must be a positive int, got {max_tool_output_chars!r}.")
        if streaming not in ("audit", "buffer"):
            raise UserError(f"streaming must be 'audit' or 'buffer', got {streaming!r}.")
        self.policy_pack = policy_pack
        self.on_decision = on_decision
        self.streaming: StreamingMode = "buffer" if policy_pack == "strict" else streaming
        self._strict = policy_pack == "strict"
        self._policies = TextPolicies(rules, max_tool_output_chars)
        self._tool_input_rules = self._policies.has_rules("tool_input")
        # message id -> None (scanned, clean) or its redacted copy (re-applied if the state still has the original).
        self._seen: dict[str, BaseMessage | None] = {}
        self._approvers: dict[str, HumanInTheLoopMiddleware] = {}

    @property
    def name(self) -> str:
        """Middleware name (unique in the stack)."""
        return "ai_utils.Guardrails"

    @property
    def max_tool_output_chars(self) -> int:
        """Tool results are cut to this many characters before the model sees them."""
        return self._policies.max_tool_output_chars

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

    # --- model calls ---------------------------------------------------------------------------------------

    def _prepare(self, request: ModelRequest[Any]) -> _Prepared:
        messages = request.messages
        replacements: dict[int, BaseMessage] = {}
        found: list[GuardrailDecision] = []
        try:
            for index in range(len(messages) - 1, -1, -1):
                message = messages[index]
                cached = self._seen.get(message.id, _MISSING) if message.id is not None else _MISSING
                if cached is None:
                    break  # scanned and clean: everything older was scanned before it
                if cached is not _MISSING:
                    if cached.content != message.content:
                        replacements[index] = cached
                    continue
                content, more = self._policies.content(message.content, _phase_of(message))
                if more:
                    copy = message.model_copy(update={"content": content})
                    replacements[index] = copy
                    self._remember(message.id, copy)
                    found.extend(more)
                else:
                    self._remember(message.id, None)
        except Exception:
            failed = [decision(ERROR_POLICY, "input", "block", "high")]
            blocked = ModelResponse(result=[AIMessage(f"[BLOCKED:{ERROR_POLICY}]")], structured_response=None)
            return _Prepared(request, _CallTap(self._policies, failed), failed, blocked=blocked)
        tail: list[GuardrailDecision] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            tail[:0] = message.response_metadata.get(META_KEY) or ()
        prepared = _Prepared(request, _CallTap(self._policies, [*tail, *found]), found)
        if replacements:
            in_state = {m.id for m in request.state.get("messages", ())}
            prepared.persist = [m for m in replacements.values() if m.id in in_state]
            new: list[Any] = list(messages)
            for index, replacement in replacements.items():
                new[index] = replacement
            prepared.request = request.override(messages=new)
        block = next((d for d in found if d["action"] == "block" and d["phase"] == "input"), None)
        if block is not None:
            rule = next(r for r in self._policies.rules if r.id == block["policy_id"])
            prepared.blocked = ModelResponse(result=[AIMessage(rule.replacement)], structured_response=None)
        return prepared

    @contextlib.contextmanager
    def _call_scope(self, tap: _CallTap) -> Iterator[None]:
        token = POLICY_TAP.set(tap)
        config_token = None
        config = var_child_runnable_config.get() if self.streaming == "buffer" else None
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

    def _answer(self, message: AIMessage, tap: _CallTap, structured: bool) -> tuple[AIMessage, list[GuardrailDecision]]:
        if isinstance(message.content, str):
            content, found = tap.output(message.content)
            content = content if found else message.content
        else:
            content, found = self._policies.content(message.content, "output")
        update: dict[str, Any] = {"content": content} if found else {}
        if structured and message.tool_calls:
            # With a structured-output strategy the answer is the output tool's arguments.
            calls: list[Any] = []
            in_args: list[GuardrailDecision] = []
            for call in message.tool_calls:
                args, more = self._policies.args(call["args"], None, "output")
                calls.append({**call, "args": args})
                in_args.extend(more)
            if in_args:
                update["tool_calls"] = calls
                found = [*found, *in_args]
        return (message.model_copy(update=update) if update else message), found

    def _finish(self, response: ModelResponse[Any], prepared: _Prepared) -> Any:
        result: list[BaseMessage] = []
        found: list[GuardrailDecision] = []
        structured = response.structured_response
        try:
            for message in response.result:
                if isinstance(message, AIMessage):
                    message, more = self._answer(message, prepared.tap, structured is not None)
                    found.extend(more)
                    if message.id is None:
                        message = message.model_copy(update={"id": f"lc_{uuid.uuid4()}"})
                elif structured is not None and isinstance(message, ToolMessage):
                    content, more = self._policies.content(message.content, "output")
                    message = message.model_copy(update={"content": content}) if more else message
                self._remember(message.id, None)
                result.append(message)
            if structured is not None:
                structured, more = self._policies.structured(structured)
                found.extend(more)
        except Exception:
            blocked = AIMessage(f"[BLOCKED:{ERROR_POLICY}]", id=f"lc_{uuid.uuid4()}")
            self._remember(blocked.id, None)
            result, structured = [blocked], None
            found = [decision(ERROR_POLICY, "output", "block", "high")]
        if structured is not None:  # the same secret in the output call, its receipt and the answer: one decision
            found = list({tuple(sorted(d.items())): d for d in found}.values())
        prepared.emit.extend(found)
        out = ModelResponse(result=result, structured_response=structured) if found else response
        if prepared.persist:
            return ExtendedModelResponse(model_response=out, command=Command(update={"messages": prepared.persist}))
        return out

    def _blocked_result(self, prepared: _Prepared) -> Any:
        assert prepared.blocked is not None
        if prepared.persist:
            command: Command[Any] = Command(update={"messages": prepared.persist})
            return ExtendedModelResponse(model_response=prepared.blocked, command=command)
        return prepared.blocked

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> Any:
        """Scan new messages, call the model (tapped, buffered when asked), scan its answer."""
        prepared = self._prepare(request)
        if prepared.blocked is not None:
            self._emit(prepared.emit)
            return self._blocked_result(prepared)
        self._emit(prepared.emit)
        prepared.emit = []
        with self._call_scope(prepared.tap):
            response = handler(prepared.request)
        result = self._finish(response, prepared)
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
        prepared = self._prepare(request)
        if prepared.blocked is not None:
            await self._aemit(prepared.emit)
            return self._blocked_result(prepared)
        await self._aemit(prepared.emit)
        prepared.emit = []
        with self._call_scope(prepared.tap):
            response = await handler(prepared.request)
        result = self._finish(response, prepared)
        await self._aemit(prepared.emit)
        return result
