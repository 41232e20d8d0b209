"""Host code that guardrails call: ``policies=`` (bounded, fail closed under ``strict``) and ``approve=``.

A host policy is ``(phase, payload) -> PolicyResult | None`` (sync or async): ``payload`` is the text for
``input``/``context``/``output`` and ``{"tool": name, "args": {...}}`` / ``{"tool": name, "text": ...}`` for
``tool_input`` / ``tool_output`` (``args`` is ``None`` when the arguments are past the scan bounds: a copy of them
would not be bounded either). Each call is bounded by `POLICY_TIMEOUT`: a sync policy runs on a small worker pool
(a policy that hangs keeps its worker, never the run), an async one under ``asyncio.wait_for``. A policy that raises,
times out or answers something malformed is a failed policy: under ``strict`` it blocks what it looked at, otherwise
the failure is reported (an ``audit`` decision) and the run goes on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import copy
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Required

from typing_extensions import TypedDict

from ai_utils._utils import is_async_callable, run_sync
from ai_utils.exceptions import UserError
from ai_utils.guard._rules import RISKS, GuardrailDecision, Phase, Risk
from ai_utils.guard._scan import decision

__all__ = ["POLICY_TIMEOUT", "Approver", "HostPolicies", "HostPolicy", "Outcome", "PolicyResult"]

POLICY_TIMEOUT: Final = 1.0
"""Seconds a host policy may take per call; past it the policy has failed (see the module docstring)."""

_ACTIONS = frozenset({"allow", "audit", "redact", "block", "require_approval"})
# Sync host code runs here, so a hung policy holds one of these threads, never the run or the event loop.
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="ai_utils-guardrail-policy")


class PolicyResult(TypedDict, total=False):
    """What a host policy answers (or ``None``: nothing to say).

    Attributes:
        action: ``"allow"`` (nothing recorded), ``"audit"`` (recorded, nothing changed), ``"redact"`` (``value``
            replaces the payload: a str for text phases, the arguments mapping for ``tool_input``), ``"block"``
            (text is replaced by ``[BLOCKED:<policy_id>]``; a tool call is not run; an input ends the turn), or
            ``"require_approval"`` (``tool_input`` only: the call waits for ``approve=`` or a HITL decision).
        risk: ``"low"``, ``"medium"`` (default), ``"high"`` or ``"critical"``.
        policy_id: the decision's id (default: the policy's ``policy_id`` attribute or function name).
        value: the replacement for ``"redact"``.
    """

    action: Required[Literal["allow", "audit", "redact", "block", "require_approval"]]
    risk: Risk
    policy_id: str
    value: Any


HostPolicy = Callable[[Phase, Any], "PolicyResult | Mapping[str, Any] | None | Awaitable[Any]"]
"""A host policy: ``(phase, payload) -> PolicyResult | None``, sync or async."""
Approver = Callable[[Mapping[str, Any]], "bool | Awaitable[bool]"]
"""``approve=``: ``(tool_call) -> bool`` (``{"name", "args", "id"}``), sync or async; only ``True`` approves."""


@dataclass(frozen=True, slots=True)
class _Policy:
    fn: Callable[..., Any]
    policy_id: str
    is_async: bool


@dataclass(slots=True)
class Outcome:
    """What the host policies did to one payload."""

    value: Any
    decisions: list[GuardrailDecision] = field(default_factory=list)
    changed: bool = False
    block: GuardrailDecision | None = None
    approval: bool = False


def _policy_id(fn: Any) -> str:
    given = getattr(fn, "policy_id", None)
    if isinstance(given, str) and given:
        return given
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return f"host.{name}"


def _in_worker(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``; an awaitable answer is run to its end on this (worker) thread's own event loop."""
    result = fn(*args)
    if inspect.isawaitable(result):

        async def finish() -> Any:
            return await result

        return run_sync(finish(), what="a host policy")
    return result


def call_bounded(fn: Callable[..., Any], *args: Any, timeout: float | None) -> Any:
    """``fn(*args)`` on the worker pool, waited for at most ``timeout`` seconds (`TimeoutError` past it)."""
    future = _POOL.submit(contextvars.copy_context().run, _in_worker, fn, *args)
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"took longer than {timeout} s") from None


async def acall_bounded(fn: Callable[..., Any], *args: Any, is_async: bool, timeout: float | None) -> Any:
    """Async twin of `call_bounded`: an async ``fn`` is awaited here, a sync one runs on the worker pool."""
    if is_async:
        return await asyncio.wait_for(fn(*args), timeout)
    loop = asyncio.get_running_loop()
    work = loop.run_in_executor(_POOL, contextvars.copy_context().run, _in_worker, fn, *args)
    return await asyncio.wait_for(work, timeout)


class HostPolicies:
    """The ``policies=`` of one guardrails instance, run in order on each payload."""

    def __init__(self, policies: Sequence[HostPolicy]) -> None:
        if isinstance(policies, str | bytes | Mapping) or not isinstance(policies, Sequence):
            raise UserError(
                f"policies must be a list of functions (phase, payload) -> decision | None, got {policies!r}."
            )
        for policy in policies:
            if not callable(policy):
                raise UserError(
                    f"policies must hold functions (phase, payload) -> decision | None, got {policy!r}; pass a "
                    "function or an object with __call__."
                )
        self.policies: tuple[_Policy, ...] = tuple(_Policy(p, _policy_id(p), is_async_callable(p)) for p in policies)
        self.callables: tuple[HostPolicy, ...] = tuple(policies)

    def __bool__(self) -> bool:
        return bool(self.policies)

    @staticmethod
    def _payload(phase: Phase, value: Any, tool: str | None) -> Any:
        if phase == "tool_input":
            return {"tool": tool, "args": copy.deepcopy(value)}
        if phase == "tool_output":
            return {"tool": tool, "text": value}
        return value

    def run(self, phase: Phase, value: Any, tool: str | None, *, strict: bool) -> Outcome:
        """Every policy on ``value`` (sync runs); see the module docstring for failures."""
        outcome = Outcome(value)
        for policy in self.policies:
            try:
                answer = call_bounded(
                    policy.fn, phase, self._payload(phase, outcome.value, tool), timeout=POLICY_TIMEOUT
                )
            except Exception as error:
                answer = error
            if self._settle(outcome, policy, answer, phase, tool, strict):
                break
        return outcome

    async def arun(self, phase: Phase, value: Any, tool: str | None, *, strict: bool) -> Outcome:
        """Async twin of `run`."""
        outcome = Outcome(value)
        for policy in self.policies:
            try:
                payload = self._payload(phase, outcome.value, tool)
                answer = await acall_bounded(
                    policy.fn, phase, payload, is_async=policy.is_async, timeout=POLICY_TIMEOUT
                )
            except Exception as error:
                answer = error
            if self._settle(outcome, policy, answer, phase, tool, strict):
                break
        return outcome

    @staticmethod
    def _settle(outcome: Outcome, policy: _Policy, answer: Any, phase: Phase, tool: str | None, strict: bool) -> bool:
        """Record ``answer`` (a result, ``None`` or the exception) on ``outcome``; ``True`` when it blocks."""
        if answer is None:
            return False
        failure: str | None = None
        if isinstance(answer, BaseException):
            failure = "timeout" if isinstance(answer, TimeoutError) else "error"
        elif not isinstance(answer, Mapping) or answer.get("action") not in _ACTIONS:
            failure = "malformed"
        elif answer.get("risk", "medium") not in RISKS:
            failure = "malformed"
        elif answer["action"] == "require_approval" and phase != "tool_input":
            failure = "malformed"
        elif answer["action"] == "redact" and not _fits(answer.get("value", _MISSING), phase):
            failure = "malformed"
        if failure is not None:
            event = decision(policy.policy_id, phase, "block" if strict else "audit", "high", tool)
            event["reason"] = failure
            outcome.decisions.append(event)
            if strict:
                outcome.block = event
                return True
            return False
        action = answer["action"]
        if action == "allow":
            return False
        policy_id = answer.get("policy_id")
        if not isinstance(policy_id, str) or not policy_id:
            policy_id = policy.policy_id
        event = decision(policy_id, phase, action, answer.get("risk", "medium"), tool)
        outcome.decisions.append(event)
        if action == "redact":
            outcome.value = answer["value"]
            outcome.changed = True
        elif action == "require_approval":
            outcome.approval = True
        elif action == "block":
            outcome.block = event
            return True
        return False


_MISSING: Any = object()


def _fits(value: Any, phase: Phase) -> bool:
    if phase == "tool_input":
        return isinstance(value, Mapping)
    return isinstance(value, str)


def ask_approval(approve: Approver, tool_call: Mapping[str, Any]) -> bool:
    """``approve(tool_call)`` in a sync run; anything but ``True`` (an exception too) denies."""
    try:
        call = {"name": tool_call["name"], "args": copy.deepcopy(tool_call["args"]), "id": tool_call.get("id")}
        answer = approve(call)
        if inspect.isawaitable(answer):
            answer = call_bounded(lambda: answer, timeout=None)
    except Exception:
        return False
    return answer is True


async def aask_approval(approve: Approver, tool_call: Mapping[str, Any]) -> bool:
    """Async twin of `ask_approval`."""
    try:
        call = {"name": tool_call["name"], "args": copy.deepcopy(tool_call["args"]), "id": tool_call.get("id")}
        answer = approve(call)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception:
        return False
    return answer is True
