"""The HITL helpers on real approvals: two parallel gated calls pause as one batch, each needs its own answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ai_utils import (
    Agent,
    DeepAgent,
    UserError,
    approve_all,
    approve_decision,
    create_resume_command,
    edit_decision,
    is_interrupt,
    is_interrupt_batch,
    is_interrupt_result,
    map_result_to_interrupt,
    memory_sessions,
    reject_decision,
    respond_decision,
)
from ai_utils.testing import FakeChatModel
from ai_utils.tools.durable import durable_tool

TWO_MAILS = {
    "tool_calls": [
        {"name": "send_mail", "args": {"to": "a@x.de"}, "id": "m1"},
        {"name": "send_mail", "args": {"to": "b@x.de"}, "id": "m2"},
    ]
}


class Outbox:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def tool(self) -> Any:
        def send_mail(to: str) -> str:
            """Send a mail."""
            self.sent.append(to)
            return f"sent to {to}"

        return send_mail


def mail_agent(outbox: Outbox, **options: Any) -> Agent[str]:
    return Agent(
        llm=FakeChatModel([TWO_MAILS, "Erledigt."]),
        tools=[outbox.tool()],
        checkpointer=InMemorySaver(),
        interrupt_on={"send_mail": {"decisions": ["approve", "edit", "reject", "respond"], "question": "Senden?"}},
        **options,
    )


def results(agent: Any, thread: str) -> dict[str, tuple[str, str]]:
    messages = agent.get_state(thread).values["messages"]
    return {m.tool_call_id: (m.status, m.text) for m in messages if isinstance(m, ToolMessage)}


def test_the_decision_builders_give_the_forms_the_mapper_takes() -> None:
    assert approve_decision() == {"type": "approve"}
    assert reject_decision() == {"type": "reject"}
    assert reject_decision("Nein.") == {"type": "reject", "message": "Nein."}
    assert edit_decision({"to": "c@x.de"}) == {"type": "edit", "args": {"to": "c@x.de"}}
    assert respond_decision("Schon erledigt.") == {"type": "respond", "message": "Schon erledigt."}
    with pytest.raises(UserError, match="reject_decision"):
        reject_decision(3)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="edit_decision"):
        edit_decision("to=c")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="respond_decision"):
        respond_decision(None)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="is_interrupt"):
        approve_all("Erledigt.")  # type: ignore[arg-type]
    # A whole raw result (every message of the run) is not quoted back: only a bounded preview.
    with pytest.raises(UserError, match="map_result_to_interrupt") as raised:
        approve_all({"messages": ["x" * 5000] * 50})  # type: ignore[arg-type]
    assert len(str(raised.value)) < 600


def test_one_decision_for_two_pending_calls_is_refused_and_approve_all_runs_both() -> None:
    outbox = Outbox()
    agent = mail_agent(outbox)
    paused = agent.invoke("Schick beide", thread_id="t")
    assert is_interrupt_batch(paused) and [i["args"] for i in paused["items"]] == [{"to": "a@x.de"}, {"to": "b@x.de"}]

    with pytest.raises(UserError, match=r"2 items are pending.*`decisions=.*approve_all") as info:
        agent.invoke(thread_id="t", decision="approve")
    assert "decision='approve'" in str(info.value)
    assert outbox.sent == [] and agent.pending("t") == paused  # nothing ran, the approval still waits

    assert approve_all(paused) == [{"type": "approve"}, {"type": "approve"}]
    assert agent.invoke(thread_id="t", decisions=approve_all(paused)) == "Erledigt."
    assert outbox.sent == ["a@x.de", "b@x.de"]


def test_mixed_decisions_from_the_builders_answer_each_item() -> None:
    outbox = Outbox()
    agent = mail_agent(outbox)
    agent.invoke("Schick beide", thread_id="t")
    chunks = list(agent.stream(thread_id="t", decisions=[edit_decision({"to": "c@x.de"}), reject_decision("Nein.")]))
    assert "".join(c for c in chunks if isinstance(c, str)) == "Erledigt."
    assert outbox.sent == ["c@x.de"]
    status, text = results(agent, "t")["m2"]
    assert status == "error" and text.endswith("Nein.")


def test_create_resume_command_resumes_the_raw_graph_with_mixed_decisions() -> None:
    outbox = Outbox()
    agent = mail_agent(outbox)
    config: Any = {"configurable": {"thread_id": "t"}}
    raw = agent.graph.invoke({"messages": [("user", "Schick beide")]}, config)
    assert is_interrupt_result(raw) and not is_interrupt_result({"messages": []})
    assert map_result_to_interrupt(raw) == agent.pending("t")
    assert map_result_to_interrupt(agent.graph.get_state(config)) == agent.pending("t")
    assert map_result_to_interrupt("Erledigt.") is None

    command = create_resume_command([approve_decision(), respond_decision("Schon gesendet.")])
    assert isinstance(command, Command)
    assert command.resume == {"decisions": [{"type": "approve"}, {"type": "respond", "message": "Schon gesendet."}]}
    done = agent.graph.invoke(command, config)
    assert not is_interrupt_result(done) and map_result_to_interrupt(done) is None
    assert outbox.sent == ["a@x.de"]
    status, text = results(agent, "t")["m2"]
    assert status == "success" and text == "Schon gesendet."  # respond: the human answers in the tool's place


def test_create_resume_command_with_the_pending_state_checks_and_keys_like_invoke() -> None:
    outbox = Outbox()
    agent = mail_agent(outbox)
    config: Any = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke("Schick beide", thread_id="t")
    state = agent.graph.get_state(config)
    with pytest.raises(UserError, match="2 item"):
        create_resume_command([approve_decision()], pending=state)
    with pytest.raises(UserError, match="without knowing its tool"):
        create_resume_command([edit_decision({"to": "c@x.de"}), approve_decision()])
    with pytest.raises(UserError, match="needs the decisions"):
        create_resume_command([])

    ids = [item["id"] for item in paused["items"]]  # type: ignore[typeddict-item]
    by_id = {ids[1]: reject_decision(), ids[0]: edit_decision({"to": "c@x.de"})}
    agent.graph.invoke(create_resume_command(by_id, pending=state), config)
    assert outbox.sent == ["c@x.de"]


def test_deep_agent_batch_takes_approve_all_and_refuses_one_decision(tmp_path: Path) -> None:
    writes = {
        "tool_calls": [
            {"name": "write_file", "args": {"file_path": "/a.txt", "content": "A"}, "id": "wa"},
            {"name": "write_file", "args": {"file_path": "/b.txt", "content": "B"}, "id": "wb"},
        ]
    }
    agent = DeepAgent(
        llm=FakeChatModel([writes, "Beide geschrieben."]),
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        interrupt_on={"write_file": True},
    )
    paused = agent.invoke("Schreib zwei Dateien", thread_id="t")
    assert is_interrupt(paused) and len(approve_all(paused)) == 2
    with pytest.raises(UserError, match="approve_all"):
        agent.invoke(thread_id="t", decision="approve")
    assert not (tmp_path / "a.txt").exists()
    assert agent.invoke(thread_id="t", decisions=approve_all(paused)) == "Beide geschrieben."
    assert (tmp_path / "a.txt").read_text() == "A" and (tmp_path / "b.txt").read_text() == "B"


def test_a_durable_session_refuses_one_decision_for_a_batch_before_storing_it() -> None:
    sent: list[str] = []

    def send_mail(to: str) -> str:
        """Send a mail."""
        sent.append(to)
        return f"sent to {to}"

    agent = Agent(
        llm=FakeChatModel([TWO_MAILS, "Erledigt."]),
        tools=[durable_tool(send_mail, idempotent=False)],
        sessions=memory_sessions(),
        interrupt_on={"send_mail": True},
    )
    s = agent.session()
    assert s.prompt("Schick beide").result().stop_reason == "interrupted"
    paused = agent.pending(s.id)
    assert is_interrupt_batch(paused)

    with pytest.raises(UserError, match="approve_all"):
        s.prompt(decision="approve")
    assert sent == []

    done = s.prompt(decisions=approve_all(paused)).result()
    assert (done.stop_reason, done.output) == ("end_turn", "Erledigt.")
    assert sent == ["a@x.de", "b@x.de"]
