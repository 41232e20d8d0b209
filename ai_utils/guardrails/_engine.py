"""`guardrails(...)`: one ordered policy engine as a single `create_agent` middleware.

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
import dataclasses
import inspect
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from langchain_core.tools import BaseTool
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphInterrupt
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ai_utils.exceptions import UserError
from ai_utils.gateway.callbacks import POLICY_TAP
from ai_utils.guardrails._network import private_destinations
from ai_utils.guardrails._rules import (
    ContentRule,
    GuardrailDecision,
    OnDecision,
    Phase,
    PolicyPack,
    StreamingMode,
    compile_rules,
)
from ai_utils.guardrails._scan import ERROR_POLICY, TextPolicies, decision
from ai_utils.guardrails._tools import is_destructive, is_read_only, schema_errors

__all__ = ["Guardrails", "guardrails"]

META_KEY = "ai_utils_guardrails"
"""``ToolMessage.response_metadata`` key: the decisions taken on that tool call (secret-free), read by the next
model call so they reach its audit row."""
_CACHE_MAX = 200_000
_MISSING: Any = object()
_APPROVAL_DECISIONS = ["approve", "edit", "reject"]

ToolResult = ToolMessage | Command[Any]


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


@dataclass(slots=True)
class _ToolPlan:
    request: ToolCallRequest
    decisions: list[GuardrailDecision]
    read_only: bool
    blocked: ToolMessage | None = None
    approval: bool = False


def _phase_of(message: BaseMessage) -> Phase:
    if isinstance(message, HumanMessage):
        return "input"
    if isinstance(message, ToolMessage):
        return "tool_output"
    return "context"


def _sync_result(value: Any) -> None:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise UserError("on_decision returned an awaitable in a sync run; use ainvoke/astream with an async callback.")


class Guardrails(AgentMiddleware[AgentState[Any], Any, Any]):
    """The guardrails middleware; build it with `guardrails(...)`.

    It is also a one-item sequence of itself, so ``middleware=guardrails("standard")`` and
    ``middleware=[guardrails("standard"), other]`` both work.
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

    def __getitem__(self, index: int) -> Guardrails:
        return [self][index]

    # --- decisions -----------------------------------------------------------------------------------------

    def _emit(self, decisions: Sequence[GuardrailDecision]) -> None:
        if self.on_decision is not None:
            for event in decisions:
                _sync_result(self.on_decision(dict(event)))  # type: ignore[arg-type]

    async def _aemit(self, decisions: Sequence[GuardrailDecision]) -> None:
        if self.on_decision is not None:
            for event in decisions:
                result = self.on_decision(dict(event))  # type: ignore[arg-type]
                if inspect.isawaitable(result):
                    await result

    def _remember(self, key: str | None, value: BaseMessage | None) -> None:
        if key is None:
            return
        seen = self._seen
        seen[key] = value
        if len(seen) > _CACHE_MAX:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del seen[next(iter(seen))]

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

    def _finish(self, response: ModelResponse[Any], prepared: _Prepared) -> Any:
        result: list[BaseMessage] = []
        found: list[GuardrailDecision] = []
        for message in response.result:
            if isinstance(message, AIMessage):
                try:
                    if isinstance(message.content, str):
                        content, more = prepared.tap.output(message.content)
                        content = content if more else message.content
                    else:
                        content, more = self._policies.content(message.content, "output")
                except Exception:
                    content, more = f"[BLOCKED:{ERROR_POLICY}]", [decision(ERROR_POLICY, "output", "block", "high")]
                if more:
                    message = message.model_copy(update={"content": content})
                    found.extend(more)
                if message.id is None:
                    message = message.model_copy(update={"id": f"lc_{uuid.uuid4()}"})
                self._remember(message.id, None)
            result.append(message)
        prepared.emit.extend(found)
        out = ModelResponse(result=result, structured_response=response.structured_response) if found else response
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

    # --- tool calls ----------------------------------------------------------------------------------------

    def _tool_message(self, request: ToolCallRequest, text: str, decisions: list[GuardrailDecision]) -> ToolMessage:
        call = request.tool_call
        message = ToolMessage(
            text,
            tool_call_id=call["id"] or "",
            name=call["name"],
            status="error",
            id=str(uuid.uuid4()),
            response_metadata={META_KEY: [dict(d) for d in decisions]},
        )
        self._remember(message.id, None)
        return message

    def _block(self, plan: _ToolPlan, policy_id: str, risk: Any, reason: str) -> _ToolPlan:
        name = plan.request.tool_call["name"]
        plan.decisions.append(decision(policy_id, "tool_input", "block", risk, name))
        text = f"Blocked by guardrails ({policy_id}): {reason}. The tool `{name}` was not run."
        plan.blocked = self._tool_message(plan.request, text, plan.decisions)
        return plan

    def _check_args(self, plan: _ToolPlan) -> _ToolPlan:
        """Content rules, schema and destinations for the plan's current arguments."""
        request = plan.request
        call = request.tool_call
        name = call["name"]
        policy = "tool.content"
        try:
            if self._tool_input_rules:
                args, found = self._policies.args(call["args"], name)
                plan.decisions.extend(found)
                block = next((d for d in found if d["action"] == "block"), None)
                if block is not None:
                    return self._block(plan, block["policy_id"], block["risk"], "the arguments hold blocked content")
                if found:
                    request = plan.request = request.override(tool_call={**call, "args": args})
            policy = "tool.schema"
            errors = schema_errors(request.tool, request.tool_call["args"])
            if errors:
                return self._block(plan, policy, "medium", "invalid arguments: " + "; ".join(errors[:10]))
            policy = "network.private"
            kinds = private_destinations(request.tool_call["args"])
            if kinds:
                reason = f"the arguments target a private-network destination ({', '.join(kinds)})"
                return self._block(plan, policy, "high", reason)
        except Exception as error:
            if self._strict or not plan.read_only:
                return self._block(plan, ERROR_POLICY, "high", f"policy {policy} failed ({type(error).__name__})")
            plan.decisions.append(decision(ERROR_POLICY, "tool_input", "audit", "medium", name))
        return plan

    def _plan(self, request: ToolCallRequest) -> _ToolPlan:
        name = request.tool_call["name"]
        tool: BaseTool | None = request.tool
        plan = _ToolPlan(request, [], read_only=False)
        try:
            destructive = is_destructive(name, tool)
            plan.read_only = is_read_only(name, tool)
        except Exception as error:
            return self._block(plan, ERROR_POLICY, "high", f"policy tool.destructive failed ({type(error).__name__})")
        plan = self._check_args(plan)
        if plan.blocked is None and destructive:
            if self._strict:
                return self._block(plan, "tool.destructive", "high", "destructive tools are blocked by the strict pack")
            plan.approval = True
        return plan

    def _approver(self, name: str) -> HumanInTheLoopMiddleware:
        approver = self._approvers.get(name)
        if approver is None:
            config: Any = {
                "allowed_decisions": list(_APPROVAL_DECISIONS),
                "description": f"`{name}` changes or deletes things. Run it with these arguments?",
            }
            approver = HumanInTheLoopMiddleware({name: config}, interrupt_mode="per_call")
            self._approvers[name] = approver
        return approver

    def _rechecked(self, plan: _ToolPlan, request: ToolCallRequest) -> ToolMessage | ToolCallRequest:
        """An edited call goes through the argument checks again; an approved one as it was checked."""
        if request.tool_call["args"] == plan.request.tool_call["args"]:
            return request
        edited = self._check_args(_ToolPlan(request, plan.decisions, plan.read_only))
        return edited.blocked if edited.blocked is not None else edited.request

    def _finish_tool(
        self, plan: _ToolPlan, result: ToolResult, outcome: list[GuardrailDecision]
    ) -> tuple[ToolResult, list[GuardrailDecision]]:
        """The result cut and scanned, tagged with every decision of this call; and the decisions not yet emitted."""
        name = plan.request.tool_call["name"]
        fresh = list(outcome)
        carried = [*plan.decisions, *outcome]

        def process(message: ToolMessage) -> ToolMessage:
            if message.response_metadata.get(META_KEY) is not None and message.id in self._seen:
                return message  # our own block message
            try:
                content, found = self._policies.tool_output(message.content, name)
            except Exception:
                if self._strict or not plan.read_only:
                    content, found = (
                        f"[BLOCKED:{ERROR_POLICY}]",
                        [decision(ERROR_POLICY, "tool_output", "block", "high", name)],
                    )
                else:
                    content, found = message.content, [decision(ERROR_POLICY, "tool_output", "audit", "medium", name)]
            fresh.extend(found)
            metadata = {**message.response_metadata, META_KEY: [dict(d) for d in [*carried, *found]]}
            copy = message.model_copy(
                update={"content": content, "response_metadata": metadata, "id": message.id or str(uuid.uuid4())}
            )
            self._remember(copy.id, None)
            return copy

        if isinstance(result, ToolMessage):
            return process(result), fresh
        update = result.update
        if isinstance(update, Mapping) and isinstance(update.get("messages"), list):
            messages = [process(m) if isinstance(m, ToolMessage) else m for m in update["messages"]]
            return dataclasses.replace(result, update={**update, "messages": messages}), fresh
        return result, fresh

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        """Check the call, ask for approval when destructive, run the tool at most once, check its result."""
        plan = self._plan(request)
        if plan.blocked is not None:
            self._emit(plan.decisions)
            return plan.blocked
        if not plan.approval:
            result, fresh = self._finish_tool(plan, handler(plan.request), [])
            self._emit([*plan.decisions, *fresh])
            return result
        ran: list[ToolCallRequest] = []

        def run(approved: ToolCallRequest) -> ToolResult:
            ran.append(approved)
            checked = self._rechecked(plan, approved)
            if isinstance(checked, ToolMessage):
                return checked
            return handler(checked)

        name = request.tool_call["name"]
        try:
            raw = self._approver(name).wrap_tool_call(plan.request, run)
        except GraphInterrupt:
            self._emit([*plan.decisions, decision("tool.destructive", "tool_input", "require_approval", "high", name)])
            raise
        asked, outcome = self._outcome(plan, ran, name)
        result, fresh = self._finish_tool(plan, raw, [asked, outcome])
        self._emit(fresh[1:])  # `asked` went out when the run paused
        return result

    def awrap_tool_call(  # a plain method for the reason given at `awrap_model_call`
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]
    ) -> Coroutine[Any, Any, ToolResult]:
        """Async twin of `wrap_tool_call`."""
        return self._awrap_tool_call(request, handler)

    async def _awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        plan = self._plan(request)
        if plan.blocked is not None:
            await self._aemit(plan.decisions)
            return plan.blocked
        if not plan.approval:
            result, fresh = self._finish_tool(plan, await handler(plan.request), [])
            await self._aemit([*plan.decisions, *fresh])
            return result
        ran: list[ToolCallRequest] = []

        async def run(approved: ToolCallRequest) -> ToolResult:
            ran.append(approved)
            checked = self._rechecked(plan, approved)
            if isinstance(checked, ToolMessage):
                return checked
            return await handler(checked)

        name = request.tool_call["name"]
        try:
            raw = await self._approver(name).awrap_tool_call(plan.request, run)
        except GraphInterrupt:
            asked = decision("tool.destructive", "tool_input", "require_approval", "high", name)
            await self._aemit([*plan.decisions, asked])
            raise
        asked, outcome = self._outcome(plan, ran, name)
        result, fresh = self._finish_tool(plan, raw, [asked, outcome])
        await self._aemit(fresh[1:])  # `asked` went out when the run paused
        return result

    def _outcome(
        self, plan: _ToolPlan, ran: list[ToolCallRequest], name: str
    ) -> tuple[GuardrailDecision, GuardrailDecision]:
        asked = decision("tool.destructive", "tool_input", "require_approval", "high", name)
        if not ran:
            return asked, decision("tool.destructive", "tool_input", "rejected", "high", name)
        edited = ran[0].tool_call["args"] != plan.request.tool_call["args"]
        return asked, decision("tool.destructive", "tool_input", "edited" if edited else "approved", "high", name)


def guardrails(
    policy_pack: PolicyPack = "standard",
    *,
    content_rules: Sequence[ContentRule] | Sequence[Mapping[str, Any]] = (),
    on_decision: OnDecision | None = None,
    max_tool_output_chars: int = 256_000,
    streaming: StreamingMode = "audit",
) -> Guardrails:
    """One ordered policy engine over input, retrieved context, tool input, tool output and final output.

    Use it as ``create_agent`` middleware: ``Agent(..., middleware=guardrails("standard"))`` (also `DeepAgent`
    and ``LoopRunner`` agent steps).

    Packs:
        ``"standard"``: redacts secrets in user input, tool results (retrieved context) and the model's answer
        before the model or the client sees them, as ``[REDACTED:<kind>]``. Shapes (kinds): private-key blocks
        (``private_key``), JWTs (``jwt``), Anthropic ``sk-ant-…`` (``anthropic_api_key``), OpenRouter ``sk-or-…``
        (``openrouter_api_key``), OpenAI ``sk-…``/``sk-proj-…`` (``openai_api_key``), AWS access key ids
        ``AKIA…``/``ASIA…`` (``aws_access_key``) and secret keys after ``aws_secret_access_key=``
        (``aws_secret_key``), GitHub ``ghp_…``/``gho_…``/``ghu_…``/``ghs_…``/``ghr_…``/``github_pat_…``
        (``github_token``), Slack ``xox?-…`` (``slack_token``), Google ``AIza…`` (``google_api_key``), Stripe
        ``sk_live_…``/``rk_live_…`` (``stripe_key``) and ``Bearer <token>`` (``bearer_token``). Validates tool
        arguments against the tool's schema before dispatch (invalid: an error result, the tool does not run).
        Blocks tool calls whose arguments name a private, loopback, link-local, metadata or reserved destination
        (URLs, hosts, IPv4 also in decimal/hex/octal, IPv6 also IPv4-mapped; ``localhost``-like names) without
        running the tool. Destructive tools (metadata ``destructive=True`` / ``writes=True``, MCP
        ``destructiveHint``, names ``delete_*``, ``drop_*``, ``rm``, ``execute``) wait for approval: the run
        pauses with the usual interrupt chunk and resumes with ``decision="approve"`` / ``"reject"`` / an edit.
        ``"strict"``: standard, plus destructive tools are blocked instead, any failing policy blocks (fails
        closed), and streamed answers are buffered so nothing unredacted reaches a stream.
        ``"custom"``: standard plus ``content_rules``.

    Tools run at most once, and their results are cut to ``max_tool_output_chars`` before the model sees them. A
    policy that raises blocks the call of a side-effecting or unknown tool; for an explicitly read-only tool
    (metadata ``read_only=True``) the standard pack records an ``audit`` decision and goes on.

    Args:
        policy_pack: ``"standard"``, ``"strict"`` or ``"custom"``.
        content_rules: (custom only) ``[{"id", "phases": [...], "action": "redact" | "block", "contains_any":
            [literal strings], "replacement"?, "risk"?}]``; phases from ``"input"``, ``"context"`` (also tool
            results), ``"tool_input"``, ``"tool_output"``, ``"output"``. Literals only, matched case-insensitively:
            regular expressions are not accepted. A blocked input ends the turn with the replacement text.
        on_decision: called with every decision ``{"policy_id", "phase", "action", "risk", "tool"?}`` (never the
            content); sync, or async on async runs. With gateway callbacks the same decisions go into the audit
            row of the model call they precede (or, for the answer, follow) as ``policy_decisions``.
        max_tool_output_chars: the longest tool result the model sees.
        streaming: ``"audit"`` (default: streamed text is delivered as it comes and only the stored answer is
            redacted) or ``"buffer"`` (the answer is streamed only after the output policies ran; always on under
            ``"strict"``).

    Returns:
        The middleware (also a one-item list of itself, so it can be passed as ``middleware=`` directly).

    Raises:
        UserError: an unknown pack or streaming mode, rules outside ``"custom"`` (or none in it), a malformed or
            regex rule, a non-positive ``max_tool_output_chars``, a non-callable ``on_decision``.

    Example:
        ```python
        agent = Agent(llm=llm, tools=[fetch_url, delete_user], checkpointer=MemorySaver(),
                      middleware=guardrails("standard", on_decision=print))
        ```
    """
    return Guardrails(
        policy_pack=policy_pack,
        content_rules=content_rules,
        on_decision=on_decision,
        max_tool_output_chars=max_tool_output_chars,
        streaming=streaming,
    )
