"""DeepAgent features beyond the basics: batch approval, structured output, memory, skills, MCP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from pydantic import BaseModel

from ai_utils import MCPServer
from ai_utils.client import is_interrupt, is_tool_event
from ai_utils.deep import DeepAgent
from ai_utils.testing import FakeChatModel, FunctionChatModel


def _two_writes(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    if not any(isinstance(m, ToolMessage) for m in messages):
        return {
            "tool_calls": [
                {"name": "write_file", "args": {"file_path": "/a.txt", "content": "A"}, "id": "wa"},
                {"name": "write_file", "args": {"file_path": "/b.txt", "content": "B"}, "id": "wb"},
            ]
        }
    return "beide bearbeitet"


def test_a_batch_of_two_gated_calls_takes_one_decision_each(tmp_path: Path) -> None:
    agent = DeepAgent(
        llm=FunctionChatModel(_two_writes),
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        interrupt_on={"write_file": True},
    )
    result = agent.invoke("schreib zwei", thread_id="t")
    assert is_interrupt(result) and [i["args"]["file_path"] for i in result["items"]] == ["/a.txt", "/b.txt"]  # type: ignore[typeddict-item,index]
    assert agent.invoke(thread_id="t", decisions=["approve", "reject"]) == "beide bearbeitet"
    assert (tmp_path / "a.txt").read_text() == "A"
    assert not (tmp_path / "b.txt").exists()


class Answer(BaseModel):
    """The answer."""

    value: int


def test_output_returns_the_validated_model() -> None:
    llm = FakeChatModel([{"tool_calls": [{"name": "Answer", "args": {"value": 42}}]}])
    agent = DeepAgent(llm=llm, output=Answer, checkpointer=None)
    assert agent.invoke("wie viel?") == Answer(value=42)


def _system(messages: list[BaseMessage]) -> str:
    return messages[0].text if isinstance(messages[0], SystemMessage) else ""


def test_agents_md_and_skills_reach_the_system_prompt(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Der Nutzer heißt Jana.")
    skill = tmp_path / "skills" / "pdf-tools"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pdf-tools\ndescription: Arbeitet mit PDF-Dateien.\n---\n# PDF\n")
    seen: list[str] = []

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        seen.append(_system(messages))
        return "ok"

    agent = DeepAgent(
        llm=FunctionChatModel(reply),
        prompt="Sei gründlich.",
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        agents_md=["/AGENTS.md"],
        skills=["/skills/"],
    )
    agent.invoke("hi", thread_id="t")
    assert "Sei gründlich." in seen[0]
    assert "Der Nutzer heißt Jana." in seen[0]
    assert "pdf-tools" in seen[0] and "Arbeitet mit PDF-Dateien." in seen[0]


def test_mcp_tools_are_named_by_server_and_work_in_invoke_and_stream(counter_url: str) -> None:
    inc = {"tool_calls": [{"name": "counter__increment", "args": {}}]}
    llm = FakeChatModel([inc, "eins", inc, "wieder eins"])
    agent = DeepAgent(llm=llm, mcp_server=MCPServer("counter", counter_url, description="Zählt."), checkpointer=None)
    assert "Zählt." in (agent.system_prompt or "")
    assert agent.invoke("zähle") == "eins"
    chunks = list(agent.stream("zähle", show_tool_calls=True))
    ends = [c for c in chunks if is_tool_event(c) and c["phase"] == "end"]
    assert ends and ends[0]["tool_name"] == "counter__increment" and ends[0]["output"] == "1"
    assert "".join(c for c in chunks if isinstance(c, str)) == "wieder eins"


def test_with_mcp_and_a_checkpointer_a_fresh_thread_has_nothing_pending(counter_url: str) -> None:
    agent = DeepAgent(llm=FakeChatModel(["x"]), mcp_server=MCPServer("counter", counter_url))
    assert agent.pending("neu") is None
    assert "write_file" in agent.current_tools


def test_callbacks_of_the_agent_and_of_the_call_both_see_the_model_calls() -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    class Recorder(BaseCallbackHandler):
        def __init__(self) -> None:
            self.starts = 0

        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            self.starts += 1

    always, once = Recorder(), Recorder()
    agent = DeepAgent(llm=FakeChatModel(["a", "b"]), callbacks=[always])
    agent.invoke("eins", thread_id="t", callbacks=[once])
    agent.invoke("zwei", thread_id="t")
    assert (always.starts, once.starts) == (2, 1)


def test_after_a_restart_a_new_agent_on_the_same_sqlite_file_sees_and_resumes_the_interrupt(tmp_path: Path) -> None:
    from ai_utils.memory.sqlite import sqlite_saver

    def build() -> DeepAgent:
        return DeepAgent(
            llm=FunctionChatModel(_two_writes),
            checkpointer=sqlite_saver(tmp_path / "threads.db"),
            backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
            interrupt_on={"write_file": {"decisions": ["approve", "edit", "reject"]}},
        )

    first = build().invoke("schreib zwei", thread_id="t")
    assert is_interrupt(first)
    again = build()
    assert again.pending("t") == first
    edited = {"type": "edit", "args": {"file_path": "/a.txt", "content": "bearbeitet"}}
    assert again.invoke(thread_id="t", decisions=[edited, "reject"]) == "beide bearbeitet"
    assert (tmp_path / "a.txt").read_text() == "bearbeitet"
    assert not (tmp_path / "b.txt").exists()


def test_the_wrong_number_of_decisions_is_a_user_error(tmp_path: Path) -> None:
    from ai_utils.exceptions import UserError

    agent = DeepAgent(llm=FunctionChatModel(_two_writes), interrupt_on={"write_file": True})
    agent.invoke("schreib zwei", thread_id="t")
    with pytest.raises(UserError):
        agent.invoke(thread_id="t", decisions=["approve"])
    assert is_interrupt(agent.pending("t"))


def test_with_mcp_the_graph_is_built_once_and_an_approved_call_runs_in_the_resuming_run(counter_url: str) -> None:
    whoami = {"tool_calls": [{"name": "counter__whoami", "args": {}, "id": "w1"}]}
    llm = FakeChatModel([whoami, "gefragt"])
    agent = DeepAgent(
        llm=llm,
        mcp_server=MCPServer("counter", counter_url),
        interrupt_on={"counter__whoami": {"decisions": ["approve"]}},
    )
    paused = agent.invoke("wer bist du?", thread_id="t")
    assert is_interrupt(paused) and paused["tool_name"] == "counter__whoami"  # type: ignore[typeddict-item]
    graph = agent.graph
    assert agent.pending("t") == paused

    assert agent.invoke(thread_id="t", decision="approve") == "gefragt"
    assert agent.graph is graph
    results = [m for m in llm.calls[1] if isinstance(m, ToolMessage)]
    assert results and json.loads(results[0].text)["session_id"]  # called through the resuming run's session
