"""The tool-call half of guardrails: argument checks, approval or block, one run, result bounds and scans.

``wrap_tool_call`` order: ``tool_input`` content rules, schema validation, private-network destinations, then for a
destructive tool a block (strict) or LangChain's per-call `HumanInTheLoopMiddleware` interrupt (the usual interrupt
chunk; ``decision=`` resumes it; an edit is checked again), the tool at most once, then ``tool_output``. The
decisions of a call ride on its `ToolMessage` (``response_metadata``) to the next model call's audit row.
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
from ai_utils.guard._network import private_destinations
from ai_utils.guard._rules import GuardrailDecision, OnDecision
from ai_utils.guard._scan import ERROR_POLICY, TextPolicies, decision
from ai_utils.guard._tools import is_destructive, is_read_only, schema_errors

__all__ = ["META_KEY", "ToolCallPolicies"]

META_KEY = "ai_utils_guardrails"
"""``ToolMessage.response_metadata`` key: the decisions taken on that tool call (secret-free), read by the next
model call so they reach its audit row."""
_CACHE_MAX = 200_000
_APPROVAL_DECISIONS = ["approve", "edit", "reject"]

ToolResult = ToolMessage | Command[Any]


@dataclass(slots=True)
class _ToolPlan:
    request: ToolCallRequest
    decisions: list[GuardrailDecision]
    read_only: bool
    blocked: ToolMessage | None = None
    approval: bool = False


def _sync_result(value: Any) -> None:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise UserError("on_decision returned an awaitable in a sync run; use ainvoke/astream with an async callback.")


class ToolCallPolicies:
    """Tool-call policies and the decision plumbing shared with the model-call half (`Guardrails`)."""

    on_decision: OnDecision | None
    _policies: TextPolicies
    _strict: bool
    _tool_input_rules: bool
    _approvers: dict[str, HumanInTheLoopMiddleware]
    _seen: dict[str, BaseMessage | None]

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

    def _rechecked(
        self, plan: _ToolPlan, request: ToolCallRequest, extra: list[GuardrailDecision]
    ) -> ToolMessage | ToolCallRequest:
        """The request to run, or the block result: an edited call goes through the argument checks again."""
        if request.tool_call["args"] == plan.request.tool_call["args"]:
            return request
        edited = self._check_args(_ToolPlan(request, [], plan.read_only))
        extra.extend(edited.decisions)
        return edited.blocked if edited.blocked is not None else edited.request

    def _finish_tool(
        self, plan: _ToolPlan, result: ToolResult, outcome: list[GuardrailDecision]
    ) -> tuple[ToolResult, list[GuardrailDecision]]:
        """The result cut and scanned, tagged with every decision of this call; and the decisions not yet emitted."""
        name = plan.request.tool_call["name"]
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
                if self._strict or not plan.read_only:
                    content, found = (
                        f"[BLOCKED:{ERROR_POLICY}]",
                        [decision(ERROR_POLICY, "tool_output", "block", "high", name)],
                    )
                else:
                    content, found = message.content, [decision(ERROR_POLICY, "tool_output", "audit", "medium", name)]
            fresh.extend(found)
            tagged = [*carried, *found]
            if found:
                metadata = {**message.response_metadata, META_KEY: [dict(d) for d in tagged]}
                message = message.model_copy(update={"content": content, "response_metadata": metadata})
            elif tagged:
                message.response_metadata[META_KEY] = [dict(d) for d in tagged]
            # The tool node built this message for this call only, so setting fields in place is safe (and saves
            # a copy per tool call); an id lets the next model call skip the already-scanned result.
            if message.id is None:
                message.id = str(uuid.uuid4())
            self._remember(message.id, None)
            return message

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
        extra: list[GuardrailDecision] = []

        def run(approved: ToolCallRequest) -> ToolResult:
            ran.append(approved)
            checked = self._rechecked(plan, approved, extra)
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
        result, fresh = self._finish_tool(plan, raw, [asked, outcome, *extra])
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
        extra: list[GuardrailDecision] = []

        async def run(approved: ToolCallRequest) -> ToolResult:
            ran.append(approved)
            checked = self._rechecked(plan, approved, extra)
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
        result, fresh = self._finish_tool(plan, raw, [asked, outcome, *extra])
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
