"""JevToolCaller human in the loop: interrupt, approve/reject across a process restart, secrets kept local."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from ai_utils.exceptions import UserError
from ai_utils.jev import JevGated, JevInterrupt, JevProposalChangedError, JevReturn, JevTool, JevToolCaller
from ai_utils.testing.jev_server import FakeJevServer

SECRET = "sk-SENTINEL-7f3a9c"


class Ctx(BaseModel):
    tenant: str
    api_token: str


CTX = {"tenant": "acme", "api_token": SECRET}


def make(jev: FakeJevServer, tools: list[Any], **kwargs: Any) -> JevToolCaller:
    kwargs.setdefault("checkpointer", InMemorySaver())
    return JevToolCaller(tools=tools, api_key=jev.api_key, base_url=jev.url, **kwargs)


class Refunds:
    def __init__(self) -> None:
        self.runs: list[Any] = []

    def tool(self) -> JevTool:
        def refund(*, params: dict[str, Any], context: Ctx) -> str:
            self.runs.append(params["amount"])
            return f"refunded {params['amount']}"

        return JevTool("send_refund", "Sends a refund.", refund, params={"amount": [10, 25]})


def test_interrupt_then_approve_runs_func_once_without_a_new_jev_call(jev: FakeJevServer) -> None:
    jev.answer("amount", choice="c1")
    refunds = Refunds()
    caller = make(
        jev,
        [refunds.tool(), JevTool("other", "Other.", lambda: None)],
        interrupt_on={"send_refund": lambda params: f"Refund über {params['amount']} freigeben?"},
        context_schema=Ctx,
    )
    out = caller.invoke({"request": "Refund 25 please"}, thread_id="c42", context=CTX)
    assert isinstance(out, JevInterrupt)
    assert (out.kind, out.question, out.tool.name, out.params["amount"].value) == (
        "interrupt",
        "Refund über 25 freigeben?",
        "send_refund",
        25,
    )
    assert refunds.runs == [] and len(jev.requests) == 2

    done = caller.invoke(thread_id="c42", decision="approve", context=CTX)
    assert isinstance(done, JevReturn)
    assert (done.value, done.rejected, done.params["amount"].value) == ("refunded 25", False, 25)
    assert refunds.runs == [25] and len(jev.requests) == 2

    with pytest.raises(UserError, match="no pending proposal"):
        caller.invoke(thread_id="c42", decision="approve", context=CTX)
    assert refunds.runs == [25]


def test_reject_returns_rejected_and_func_never_runs(jev: FakeJevServer) -> None:
    refunds = Refunds()
    caller = make(jev, [refunds.tool()], interrupt_on={"send_refund": "Refund freigeben?"}, context_schema=Ctx)
    assert isinstance(caller.invoke({"request": "refund"}, thread_id="t", context=CTX), JevInterrupt)
    out = caller.invoke(thread_id="t", decision="reject", context=CTX)
    assert isinstance(out, JevReturn)
    assert (out.value, out.rejected, out.tool.name, out.params["amount"].value) == (None, True, "send_refund", 10)
    assert refunds.runs == []
    caller.invoke({"request": "next"}, thread_id="t", context=CTX)
    history = jev.requests[-1].body["state"]["message_history"]
    assert history[:2] == [
        {"role": "user", "content": {"request": "refund"}},
        {"role": "assistant", "content": {"tool": "send_refund", "params": {"amount": 10}, "rejected": True}},
    ]


def test_the_gate_runs_before_interrupt_on_so_a_weak_proposal_is_never_shown(jev: FakeJevServer) -> None:
    jev.answer("tool", probabilities={"send_refund": 0.6, "other": 0.4})
    refunds = Refunds()
    caller = make(jev, [refunds.tool(), JevTool("other", "O.", lambda: None)], interrupt_on={"send_refund": "Ok?"})
    out = caller.invoke({"request": "refund?"}, thread_id="t")
    assert isinstance(out, JevGated)
    with pytest.raises(UserError, match="no pending proposal"):
        caller.invoke(thread_id="t", decision="approve")


def test_tools_without_an_interrupt_entry_run_straight_through(jev: FakeJevServer) -> None:
    jev.answer("tool", choice="other")
    caller = make(
        jev, [Refunds().tool(), JevTool("other", "O.", lambda: "direct")], interrupt_on={"send_refund": "Ok?"}
    )
    assert caller.invoke({"q": "other"}, thread_id="t").value == "direct"  # type: ignore[union-attr]


def test_a_new_request_replaces_a_pending_proposal(jev: FakeJevServer) -> None:
    jev.answer("amount", choice="c0")
    refunds = Refunds()
    caller = make(jev, [refunds.tool()], interrupt_on={"send_refund": "Ok?"})
    first = caller.invoke({"request": "refund 10"}, thread_id="t")
    jev.answer("amount", choice="c1")
    second = caller.invoke({"request": "no, refund 25"}, thread_id="t")
    assert isinstance(first, JevInterrupt) and isinstance(second, JevInterrupt)
    assert second.params["amount"].value == 25
    assert caller.invoke(thread_id="t", decision="approve").value == "refunded 25"  # type: ignore[union-attr]
    assert refunds.runs == [25]


def test_a_question_callable_gets_tool_params_state_thread_and_context(jev: FakeJevServer) -> None:
    seen: dict[str, Any] = {}

    async def ask(**kwargs: Any) -> str:
        seen.update(kwargs)
        return "Proceed?"

    caller = make(jev, [Refunds().tool()], interrupt_on={"send_refund": ask}, context_schema=Ctx)
    caller.invoke({"request": "refund"}, thread_id="t", context=CTX)
    assert seen["tool"] == "send_refund" and seen["params"] == {"amount": 10} and seen["thread_id"] == "t"
    assert seen["context"].api_token == SECRET
    assert seen["state"]["message_history"][-1] == {"role": "user", "content": {"request": "refund"}}


def test_resume_fails_clearly_when_the_approved_candidate_is_gone(jev: FakeJevServer) -> None:
    catalogue = [["a", "b"]]
    ran: list[str] = []
    tool = JevTool("pick", "Picks.", lambda params: ran.append(params["x"]), params=lambda: {"x": catalogue[0]})
    jev.answer("x", choice="b")
    caller = make(jev, [tool], interrupt_on={"pick": "Ok?"})
    caller.invoke({"q": "b"}, thread_id="t")
    catalogue[0] = ["a", "c"]
    with pytest.raises(JevProposalChangedError, match="no longer among the candidates"):
        caller.invoke(thread_id="t", decision="approve")
    assert ran == []


def test_resume_finds_a_candidate_that_moved_in_the_list(jev: FakeJevServer) -> None:
    catalogue = [["a", "b"]]
    ran: list[str] = []
    tool = JevTool("pick", "Picks.", lambda params: ran.append(params["x"]), params=lambda: {"x": catalogue[0]})
    jev.answer("x", choice="b")
    caller = make(jev, [tool], interrupt_on={"pick": "Ok?"})
    caller.invoke({"q": "b"}, thread_id="t")
    catalogue[0] = ["b", "z", "a"]
    caller.invoke(thread_id="t", decision="approve")
    assert ran == ["b"]


async def test_async_interrupt_and_approve(jev: FakeJevServer) -> None:
    refunds = Refunds()
    caller = make(jev, [refunds.tool()], interrupt_on={"send_refund": "Ok?"}, context_schema=Ctx)
    out = await caller.ainvoke({"request": "refund"}, thread_id="t", context=CTX)
    assert isinstance(out, JevInterrupt)
    done = await caller.ainvoke(thread_id="t", decision="approve", context=CTX, debug=True)
    assert isinstance(done, JevReturn) and done.value == "refunded 10" and refunds.runs == [10]
    assert done.metadata is not None and done.metadata.usage["calls"] == 2


APP = """
import sys
from dataclasses import dataclass
from pathlib import Path
from pydantic import BaseModel
from ai_utils.jev import JevTool
from ai_utils.jev import JevToolCaller
from ai_utils.memory import sqlite_saver

url, key, db, log, step = sys.argv[1:6]

class Ctx(BaseModel):
    tenant: str
    api_token: str

@dataclass(frozen=True)
class Candidate:
    id: str
    born: int

CANDIDATES = [Candidate("c-1", 1999), Candidate("c-2", 2002)]

def candidates(*, context):
    assert context.api_token.startswith("sk-")
    return {"candidate": CANDIDATES}

def get_candidate(*, params, context, thread_id):
    with open(log, "a") as f:
        f.write(f"{params['candidate'].id} {params['candidate'] is CANDIDATES[1]} {thread_id}\\n")
    return {"id": params["candidate"].id}

saver = sqlite_saver(db)
caller = JevToolCaller(
    tools=[JevTool("get_candidate", "Returns a candidate.", get_candidate, params=candidates)],
    context_schema=Ctx, checkpointer=saver, interrupt_on={"get_candidate": "Kandidat laden?"},
    api_key=key, base_url=url,
)
ctx = {"tenant": "acme", "api_token": sys.argv[6]}
if step == "propose":
    out = caller.invoke({"question": "Welcher Kandidat wurde 2002 geboren?"}, thread_id="u1", context=ctx, debug=True)
else:
    out = caller.invoke(thread_id="u1", decision=step, context=ctx, debug=True)
print(out.model_dump_json())
saver.close()
"""


def _step(tmp_path: Path, jev: FakeJevServer, step: str) -> str:
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(APP))
    args = [sys.executable, str(app), jev.url, jev.api_key, str(tmp_path / "db.sqlite"), str(tmp_path / "log"), step]
    done = subprocess.run([*args, SECRET], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_pending_proposal_survives_a_process_restart_and_approve_runs_func_exactly_once(
    tmp_path: Path, jev: FakeJevServer
) -> None:
    jev.answer("candidate", choice="c1")
    proposed = _step(tmp_path, jev, "propose")
    assert '"kind":"interrupt"' in proposed and '"question":"Kandidat laden?"' in proposed
    assert not (tmp_path / "log").exists()
    calls = len(jev.requests)
    assert calls == 2

    approved = _step(tmp_path, jev, "approve")
    assert '"kind":"return"' in approved and '"value":{"id":"c-2"}' in approved
    assert (tmp_path / "log").read_text() == "c-2 True u1\n"  # the original instance, in the new process
    assert len(jev.requests) == calls

    # Nothing stored, sent or printed holds the context's secret.
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("db.sqlite*"))
    assert b"get_candidate" in stored and SECRET.encode() not in stored
    assert all(SECRET.encode() not in request.raw for request in jev.requests)
    assert SECRET not in proposed and SECRET not in approved


def test_reject_after_a_process_restart_never_runs_func(tmp_path: Path, jev: FakeJevServer) -> None:
    _step(tmp_path, jev, "propose")
    rejected = _step(tmp_path, jev, "reject")
    assert '"rejected":true' in rejected and '"value":null' in rejected
    assert not (tmp_path / "log").exists()
