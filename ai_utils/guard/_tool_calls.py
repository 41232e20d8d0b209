"""The tool-call half of guardrails: argument checks, approval or block, one run, result bounds and scans.

``wrap_tool_call`` order: the scan bounds of the arguments (`ai_utils.guard._walk`), ``tool_input`` content rules,
schema validation, private-network destinations, the host policies, then for a destructive tool (or one a check could
not vouch for) a block (strict) or an approval: ``approve=`` answers it in code, else LangChain's per-call
`HumanInTheLoopMiddleware` interrupt (the usual interrupt chunk; ``decision=`` resumes it; an edit is checked again).
Then the tool at most once, then ``tool_output`` (host policies too). The decisions of a call ride on its
`ToolMessage` (``response_metadata``) to the next model call's audit row; in ``mode="audit"`` nothing is changed, so
they wait in memory instead, and every block or approval is only reported: the tool runs as it would without
guardrails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphInterrupt
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ai_utils.exceptions import UserError
from ai_utils.guard._host import Approver, HostPolicies, Outcome, aask_approval, ask_approval
from ai_utils.guard._network import private_destinations
from ai_utils.guard._rules import GuardrailDecision, OnDecision
from ai_utils.guard._scan import ERROR_POLICY, TextPolicies, decision
from ai_utils.guard._settings import Settings
from ai_utils.guard._tools import is_destructive, is_read_only, schema_errors
from ai_utils.guard._walk import ScanLimitError, check_bounds

__all__ = ["META_KEY", "SCAN_LIMIT_POLICY", "ToolCallPolicies"]

META_KEY = "ai_utils_guardrails"
"""``response_metadata`` key: the decisions taken on that message before the model saw it (secret-free): on a tool
result those of its call, on a user message those taken before it was stored. Read by the next model call, so they
reach its audit row."""
SCAN_LIMIT_POLICY = "guardrails.scan_limit"
"""The policy id of a decision on a value too deep or too large to scan whole (blocked, or untrusted: approval)."""
_CACHE_MAX = 200_000
_APPROVAL_DECISIONS = ["approve", "edit", "reject"]

ToolResult = ToolMessage | Command[Any]


@dataclass(slots=True)
class _ToolPlan:
    request: ToolCallRequest
    settings: Settings
    decisions: list[GuardrailDecision]
    read_only: bool
    blocked: ToolMessage | None = None
    audited: bool = False  # audit mode: a check blocked; reported only, later checks skipped
    approval: str | None = None  # the policy that asks for approval
    scanned: bool = True  # the arguments were within the scan bounds


def _sync_result(value: Any) -> None:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise UserError("on_decision returned an awaitable in a sync run; use ainvoke/astream with an async callback.")


class ToolCallPolicies:
    """Tool-call policies and the decision plumbing shared with the model-call half (`Guardrails`)."""

    on_decision: OnDecision | None
    _policies: TextPolicies
    _host: HostPolicies
    _approve: Approver | None
    _tool_input_rules: bool
    _approvers: dict[str, HumanInTheLoopMiddleware]
    _seen: dict[str, BaseMessage | None]
    _carry: dict[str, list[GuardrailDecision]]

    def _settings(self) -> Settings:
        raise NotImplementedError

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

    def _carried(self, call_id: str, decisions: list[GuardrailDecision]) -> None:
        """Audit mode: a call's decisions wait here (not on its message) for the next model call's audit row."""
        carry = self._carry
        carry[call_id] = decisions
        if len(carry) > 10_000:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del carry[next(iter(carry))]

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

    def _block(self, plan: _ToolPlan, event: GuardrailDecision, reason: str) -> _ToolPlan:
        plan.decisions.append(event)
        if not plan.settings.enforce:
            plan.audited = True
            return plan
        name = plan.request.tool_call["name"]
        text = f"Blocked by guardrails ({event['policy_id']}): {reason}. The tool `{name}` was not run."
        plan.blocked = self._tool_message(plan.request, text, plan.decisions)
        return plan

    def _stop(self, plan: _ToolPlan) -> bool:
        return plan.blocked is not None or plan.audited

    def _check_args(self, plan: _ToolPlan) -> _ToolPlan:
        """Scan bounds, content rules, schema and destinations for the plan's current arguments."""
        request = plan.request
        call = request.tool_call
        name = call["name"]
        try:
            check_bounds(call["args"])
        except ScanLimitError:
            # Too deep or too big to check whole: never passed unchecked. Blocked under strict, else untrusted
            # (a person, or `approve=`, must let it through).
            plan.scanned = False
            if plan.settings.strict:
                event = decision(SCAN_LIMIT_POLICY, "tool_input", "block", "high", name)
                event["reason"] = "scan_limit"
                return self._block(plan, event, "the arguments are too large or too deeply nested to check")
            plan.approval = SCAN_LIMIT_POLICY
            return plan
        policy = "tool.content"
        try:
            if self._tool_input_rules:
                args, found = self._policies.args(call["args"], name)
                block = next((d for d in found if d["action"] == "block"), None)
                if block is not None:
                    plan.decisions.extend(d for d in found if d is not block)
                    return self._block(plan, block, "the arguments hold blocked content")
                plan.decisions.extend(found)
                if found and plan.settings.enforce:
                    request = plan.request = request.override(tool_call={**call, "args": args})
            policy = "tool.schema"
            errors = schema_errors(request.tool, request.tool_call["args"])
            if errors:
                event = decision(policy, "tool_input", "block", "medium", name)
                return self._block(plan, event, "invalid arguments: " + "; ".join(errors[:10]))
            policy = "network.private"
            kinds = private_destinations(request.tool_call["args"])
            if kinds:
                reason = f"the arguments target a private-network destination ({', '.join(kinds)})"
                return self._block(plan, decision(policy, "tool_input", "block", "high", name), reason)
        except Exception as error:
            if plan.settings.strict or not plan.read_only:
                event = decision(ERROR_POLICY, "tool_input", "block", "high", name)
                return self._block(plan, event, f"policy {policy} failed ({type(error).__name__})")
            plan.decisions.append(decision(ERROR_POLICY, "tool_input", "audit", "medium", name))
        return plan

    def _plan(self, request: ToolCallRequest, settings: Settings) -> _ToolPlan:
        name = request.tool_call["name"]
        tool: BaseTool | None = request.tool
        plan = _ToolPlan(request, settings, [], read_only=False)
        try:
            destructive = is_destructive(name, tool)
            plan.read_only = is_read_only(name, tool)
        except Exception as error:
            event = decision(ERROR_POLICY, "tool_input", "block", "high", name)
            return self._block(plan, event, f"policy tool.destructive failed ({type(error).__name__})")
        plan = self._check_args(plan)
        if not self._stop(plan) and destructive:
            if settings.strict:
                event = decision("tool.destructive", "tool_input", "block", "high", name)
                return self._block(plan, event, "destructive tools are blocked by the strict pack")
            plan.approval = plan.approval or "tool.destructive"
        return plan

    def _host_input(self, plan: _ToolPlan, outcome: Outcome) -> _ToolPlan:
        """Apply the host policies' answer on the arguments."""
        asks = next((d for d in outcome.decisions if d["action"] == "require_approval"), None)
        # A request for approval is reported as the approval's own `require_approval` decision, once.
        plan.decisions.extend(d for d in outcome.decisions if d is not outcome.block and d is not asks)
        if outcome.block is not None:
            return self._block(plan, outcome.block, "a host policy refused the call")
        if outcome.changed and plan.settings.enforce:
            call = plan.request.tool_call
            plan.request = plan.request.override(tool_call={**call, "args": dict(outcome.value)})
        if asks is not None:
            plan.approval = plan.approval or asks["policy_id"]
        return plan

    def _host_args(self, plan: _ToolPlan) -> Any:
        return plan.request.tool_call["args"] if plan.scanned else None

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

    def _rechecked(
        self, plan: _ToolPlan, request: ToolCallRequest, extra: list[GuardrailDecision]
    ) -> ToolMessage | ToolCallRequest:
        """The request to run, or the block result: an edited call goes through the argument checks again."""
        if request.tool_call["args"] == plan.request.tool_call["args"]:
            return request
        edited = self._check_args(_ToolPlan(request, plan.settings, [], plan.read_only))
        extra.extend(edited.decisions)
        return edited.blocked if edited.blocked is not None else edited.request

    def _finish_tool(
        self, plan: _ToolPlan, result: ToolResult, outcome: list[GuardrailDecision], host: Outcome | None = None
    ) -> tuple[ToolResult, list[GuardrailDecision]]:
        """The result cut and scanned, tagged with every decision of this call; and the decisions not yet emitted."""
        name = plan.request.tool_call["name"]
        enforce = plan.settings.enforce
        fresh = list(outcome)
        carried = [*plan.decisions, *outcome]

        def process(message: ToolMessage) -> ToolMessage:
            found: list[GuardrailDecision]
            try:
                if message.id is not None and message.id in self._seen:
                    content, found = message.content, []  # our own block message (an edit that failed its checks)
                else:
                    content, found = self._policies.tool_output(message.content, name)
            except Exception:
                if plan.settings.strict or not plan.read_only:
                    content, found = (
                        f"[BLOCKED:{ERROR_POLICY}]",
                        [decision(ERROR_POLICY, "tool_output", "block", "high", name)],
                    )
                else:
                    content, found = message.content, [decision(ERROR_POLICY, "tool_output", "audit", "medium", name)]
            if host is not None:
                found = [*found, *host.decisions]
                if host.block is not None:
                    content = f"[BLOCKED:{host.block['policy_id']}]"
                elif host.changed:
                    content = host.value
            fresh.extend(found)
            tagged = [*carried, *found]
            if message.id is None:
                # The tool node built this message for this call only, so setting the id in place is safe; an id lets
                # the next model call skip the already-scanned result.
                message.id = str(uuid.uuid4())
            if not enforce:
                if tagged:
                    self._carried(message.tool_call_id, tagged)
            elif found:
                metadata = {**message.response_metadata, META_KEY: [dict(d) for d in tagged]}
                message = message.model_copy(update={"content": content, "response_metadata": metadata})
            elif tagged:
                message.response_metadata[META_KEY] = [dict(d) for d in tagged]
            self._remember(message.id, None)
            return message

        if isinstance(result, ToolMessage):
            return process(result), fresh
        update = result.update
        if isinstance(update, Mapping) and isinstance(update.get("messages"), list):
            messages = [process(m) if isinstance(m, ToolMessage) else m for m in update["messages"]]
            return dataclasses.replace(result, update={**update, "messages": messages}), fresh
        return result, fresh

    def _host_output_text(self, result: ToolResult) -> str | None:
        if isinstance(result, ToolMessage):
            return result.text
        update = result.update
        if isinstance(update, Mapping) and isinstance(update.get("messages"), list):
            texts = [m.text for m in update["messages"] if isinstance(m, ToolMessage)]
            return "\n".join(texts) if texts else None
        return None

    # --- sync ----------------------------------------------------------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        """Check the call, ask for approval when destructive, run the tool at most once, check its result."""
        settings = self._settings()
        plan = self._plan(request, settings)
        name = request.tool_call["name"]
        if self._host.policies and not self._stop(plan):
            outcome = self._host.run("tool_input", self._host_args(plan), name, strict=settings.strict)
            plan = self._host_input(plan, outcome)
        if plan.blocked is not None:
            self._emit(plan.decisions)
            return plan.blocked
        if plan.approval is None or not settings.enforce:
            if plan.approval is not None:
                plan.decisions.append(decision(plan.approval, "tool_input", "require_approval", "high", name))
            return self._run(plan, handler(plan.request), [])
        asked = decision(plan.approval, "tool_input", "require_approval", "high", name)
        if self._approve is not None:
            if ask_approval(self._approve, plan.request.tool_call):
                return self._run(plan, handler(plan.request), self._approved(plan, asked))
            message, decisions = self._rejected(plan, asked)
            self._emit(decisions)
            return message
        ran: list[ToolCallRequest] = []
        extra: list[GuardrailDecision] = []

        def run(approved: ToolCallRequest) -> ToolResult:
            ran.append(approved)
            checked = self._rechecked(plan, approved, extra)
            if isinstance(checked, ToolMessage):
                return checked
            return handler(checked)

        try:
            raw = self._approver(name).wrap_tool_call(plan.request, run)
        except GraphInterrupt:
            self._emit([*plan.decisions, asked])
            raise
        answered = self._outcome(plan, ran, asked)
        host = self._host_out(plan, raw) if ran else None  # a rejected call produced nothing to check
        result, fresh = self._finish_tool(plan, raw, [asked, answered, *extra], host)
        self._emit(fresh[1:])  # `asked` went out when the run paused
        return result

    def _run(self, plan: _ToolPlan, raw: ToolResult, outcome: list[GuardrailDecision]) -> ToolResult:
        result, fresh = self._finish_tool(plan, raw, outcome, self._host_out(plan, raw))
        self._emit([*plan.decisions, *fresh])
        return result

    def _host_out(self, plan: _ToolPlan, raw: ToolResult) -> Outcome | None:
        text = self._host_output_text(raw) if self._host.policies else None
        if text is None:
            return None
        name = plan.request.tool_call["name"]
        return self._host.run("tool_output", text, name, strict=plan.settings.strict)

    def _rejected(self, plan: _ToolPlan, asked: GuardrailDecision) -> tuple[ToolMessage, list[GuardrailDecision]]:
        """The result of a call ``approve=`` denied (not run), and the decisions to emit."""
        name = plan.request.tool_call["name"]
        decisions = [*plan.decisions, asked, decision(asked["policy_id"], "tool_input", "rejected", "high", name)]
        text = f"Not run: the approval for `{name}` was denied."
        return self._tool_message(plan.request, text, decisions), decisions

    def _approved(self, plan: _ToolPlan, asked: GuardrailDecision) -> list[GuardrailDecision]:
        name = plan.request.tool_call["name"]
        return [asked, decision(asked["policy_id"], "tool_input", "approved", "high", name)]

    # --- async ---------------------------------------------------------------------------------------------

    def awrap_tool_call(  # a plain method for the reason given at `awrap_model_call`
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]
    ) -> Coroutine[Any, Any, ToolResult]:
        """Async twin of `wrap_tool_call`."""
        return self._awrap_tool_call(request, handler)

    async def _awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        settings = self._settings()
        plan = self._plan(request, settings)
        name = request.tool_call["name"]
        if self._host.policies and not self._stop(plan):
            outcome = await self._host.arun("tool_input", self._host_args(plan), name, strict=settings.strict)
            plan = self._host_input(plan, outcome)
        if plan.blocked is not None:
            await self._aemit(plan.decisions)
            return plan.blocked
        if plan.approval is None or not settings.enforce:
            if plan.approval is not None:
                plan.decisions.append(decision(plan.approval, "tool_input", "require_approval", "high", name))
            return await self._arun(plan, await handler(plan.request), [])
        asked = decision(plan.approval, "tool_input", "require_approval", "high", name)
        if self._approve is not None:
            if await aask_approval(self._approve, plan.request.tool_call):
                return await self._arun(plan, await handler(plan.request), self._approved(plan, asked))
            message, decisions = self._rejected(plan, asked)
            await self._aemit(decisions)
            return message
        ran: list[ToolCallRequest] = []
        extra: list[GuardrailDecision] = []

        async def run(approved: ToolCallRequest) -> ToolResult:
            ran.append(approved)
            checked = self._rechecked(plan, approved, extra)
            if isinstance(checked, ToolMessage):
                return checked
            return await handler(checked)

        try:
            raw = await self._approver(name).awrap_tool_call(plan.request, run)
        except GraphInterrupt:
            await self._aemit([*plan.decisions, asked])
            raise
        answered = self._outcome(plan, ran, asked)
        host = await self._ahost_out(plan, raw) if ran else None  # a rejected call produced nothing to check
        result, fresh = self._finish_tool(plan, raw, [asked, answered, *extra], host)
        await self._aemit(fresh[1:])  # `asked` went out when the run paused
        return result

    async def _arun(self, plan: _ToolPlan, raw: ToolResult, outcome: list[GuardrailDecision]) -> ToolResult:
        result, fresh = self._finish_tool(plan, raw, outcome, await self._ahost_out(plan, raw))
        await self._aemit([*plan.decisions, *fresh])
        return result

    async def _ahost_out(self, plan: _ToolPlan, raw: ToolResult) -> Outcome | None:
        text = self._host_output_text(raw) if self._host.policies else None
        if text is None:
            return None
        name = plan.request.tool_call["name"]
        return await self._host.arun("tool_output", text, name, strict=plan.settings.strict)

    def _outcome(self, plan: _ToolPlan, ran: list[ToolCallRequest], asked: GuardrailDecision) -> GuardrailDecision:
        name = plan.request.tool_call["name"]
        if not ran:
            return decision(asked["policy_id"], "tool_input", "rejected", "high", name)
        edited = ran[0].tool_call["args"] != plan.request.tool_call["args"]
        return decision(asked["policy_id"], "tool_input", "edited" if edited else "approved", "high", name)
