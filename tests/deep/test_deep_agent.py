"""DeepAgent over deepagents with scripted models: answers, files, planning, approval, subagents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend, StateBackend
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils.client import is_interrupt, is_subagent_event
from ai_utils.deep import DeepAgent
from ai_utils.exceptions import UserError
from ai_utils.testing import FakeChatModel, FunctionChatModel

WRITE = {"tool_calls": [{"name": "write_file", "args": {"file_path": "/notes.txt", "content": "hallo"}, "id": "w1"}]}


def _tool_results(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def _writer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    results = _tool_results(messages)
    return WRITE if not results else f"fertig: {results[-1].text}"


def _files(agent: DeepAgent, thread_id: str) -> dict[str, Any]:
    state = agent.graph.get_state({"configurable": {"thread_id": thread_id}})
    return dict(state.values.get("files", {}))


def _content(file: Any) -> str:
    content = file["content"]
    return content if isinstance(content, str) else "\n".join(content)


def test_invoke_returns_the_models_answer() -> None:
    agent = DeepAgent(llm=FakeChatModel(["Hallo!"]), prompt="Sei nett.")
    assert agent.invoke("hi", thread_id="t") == "Hallo!"


async def test_ainvoke_returns_the_models_answer() -> None:
    agent = DeepAgent(llm=FakeChatModel(["Hallo async!"]))
    assert await agent.ainvoke("hi", thread_id="t") == "Hallo async!"


def test_write_file_lands_in_the_thread_state_files() -> None:
    agent = DeepAgent(llm=FunctionChatModel(_writer), backend=StateBackend())
    answer = agent.invoke("schreib notizen", thread_id="t")
    assert isinstance(answer, str) and answer.startswith("fertig")
    assert _content(_files(agent, "t")["/notes.txt"]) == "hallo"
    assert _files(agent, "other") == {}


def test_planning_and_file_tools_are_offered_to_the_model() -> None:
    seen: list[list[str]] = []

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        seen.append([t["function"]["name"] for t in tools])
        return "ok"

    agent = DeepAgent(llm=FunctionChatModel(reply))
    agent.invoke("plan", thread_id="t")
    assert {"write_todos", "ls", "read_file", "write_file", "edit_file", "task"} <= set(seen[0])
    assert "execute" not in seen[0]
    assert {"write_todos", "write_file", "task"} <= set(agent.current_tools)
    assert "execute" not in agent.current_tools


def test_add_tool_rebuilds_the_graph_and_the_model_gets_the_tool() -> None:
    seen: list[list[str]] = []

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        seen.append([t["function"]["name"] for t in tools])
        return "ok"

    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"Sonne in {city}"

    agent = DeepAgent(llm=FunctionChatModel(reply))
    agent.add_tool(get_weather)
    agent.invoke("wetter?", thread_id="t")
    assert "get_weather" in seen[0]
    assert "get_weather" in agent.current_tools
    with pytest.raises(UserError):
        agent.add_tool(get_weather)


def _gated(**kwargs: Any) -> DeepAgent:
    return DeepAgent(
        llm=FunctionChatModel(_writer),
        interrupt_on={"write_file": {"decisions": ["approve", "edit", "reject"], "question": "Datei schreiben?"}},
        **kwargs,
    )


def test_write_file_waits_for_approval_and_approve_writes_it() -> None:
    agent = _gated()
    result = agent.invoke("schreib", thread_id="t")
    assert is_interrupt(result)
    assert result["tool_name"] == "write_file"  # type: ignore[typeddict-item]
    assert result["question"] == "Datei schreiben?"  # type: ignore[typeddict-item]
    assert result["args"] == {"file_path": "/notes.txt", "content": "hallo"}  # type: ignore[typeddict-item]
    assert _files(agent, "t") == {}
    assert agent.pending("t") == result
    answer = agent.invoke(thread_id="t", decision="approve")
    assert isinstance(answer, str) and answer.startswith("fertig")
    assert _content(_files(agent, "t")["/notes.txt"]) == "hallo"
    assert agent.pending("t") is None


def test_reject_with_message_writes_nothing_and_tells_the_model() -> None:
    agent = _gated()
    agent.invoke("schreib", thread_id="t")
    answer = agent.invoke(thread_id="t", decision={"type": "reject", "message": "Nicht jetzt"})
    assert "Nicht jetzt" in str(answer)
    assert _files(agent, "t") == {}


def test_edit_decision_writes_the_edited_args() -> None:
    agent = _gated()
    agent.invoke("schreib", thread_id="t")
    agent.invoke(thread_id="t", decision={"type": "edit", "args": {"file_path": "/b.txt", "content": "neu"}})
    files = _files(agent, "t")
    assert set(files) == {"/b.txt"}
    assert _content(files["/b.txt"]) == "neu"


def test_stream_ends_with_the_interrupt_and_resumes_by_stream() -> None:
    agent = _gated()
    chunks = list(agent.stream("schreib", thread_id="t", show_tool_calls=True))
    interrupts = [c for c in chunks if is_interrupt(c)]
    assert len(interrupts) == 1 and chunks[-1] == interrupts[0]
    assert agent.pending("t") == interrupts[0]
    resumed = list(agent.stream(thread_id="t", decision="approve"))
    assert "".join(c for c in resumed if isinstance(c, str)).startswith("fertig")


def _team(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    system = messages[0].text if isinstance(messages[0], SystemMessage) else ""
    results = _tool_results(messages)
    if "RESEARCHER" in system:
        return "Befund: 42" if not results else "Befund nach dem Schreiben: 42"
    if not results:
        return {
            "tool_calls": [
                {"name": "task", "args": {"description": "finde die Antwort", "subagent_type": "researcher"}}
            ]
        }
    return f"Die Antwort: {results[-1].text}"


RESEARCHER = {"name": "researcher", "description": "Recherchiert.", "system_prompt": "RESEARCHER: finde Fakten."}


def test_subagent_text_streams_as_subagent_events_only_when_asked() -> None:
    agent = DeepAgent(llm=FunctionChatModel(_team), subagents=[RESEARCHER])
    shown = list(agent.stream("frage", thread_id="a", show_subagents=True))
    events = [c for c in shown if is_subagent_event(c)]
    assert events and "".join(e["text"] for e in events) == "Befund: 42"
    assert all(e["namespace"] and e.get("name") == "researcher" for e in events)
    text = "".join(c for c in shown if isinstance(c, str))
    assert text == "Die Antwort: Befund: 42"

    hidden = list(DeepAgent(llm=FunctionChatModel(_team), subagents=[RESEARCHER]).stream("frage", thread_id="b"))
    assert not any(is_subagent_event(c) for c in hidden)
    assert "".join(c for c in hidden if isinstance(c, str)) == "Die Antwort: Befund: 42"


def _gated_team(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    system = messages[0].text if isinstance(messages[0], SystemMessage) else ""
    if "RESEARCHER" in system and not _tool_results(messages):
        return WRITE
    return _team(messages, tools)


def test_subagent_interrupt_surfaces_once_and_resumes_from_the_root() -> None:
    agent = DeepAgent(
        llm=FunctionChatModel(_gated_team),
        subagents=[RESEARCHER],
        interrupt_on={"write_file": {"decisions": ["approve", "reject"]}},
    )
    chunks = list(agent.stream("frage", thread_id="t", show_subagents=True, show_tool_calls=True))
    interrupts = [c for c in chunks if is_interrupt(c)]
    assert len(interrupts) == 1
    assert interrupts[0]["tool_name"] == "write_file"  # type: ignore[typeddict-item]
    assert agent.pending("t") == interrupts[0]
    answer = agent.invoke(thread_id="t", decision="approve")
    assert answer == "Die Antwort: Befund nach dem Schreiben: 42"
    assert agent.pending("t") is None


async def test_astream_and_apending_see_the_same_interrupt() -> None:
    agent = _gated()
    chunks = [c async for c in agent.astream("schreib", thread_id="t")]
    assert is_interrupt(chunks[-1])
    assert await agent.apending("t") == chunks[-1]
    answer = await agent.ainvoke(thread_id="t", decision="approve")
    assert isinstance(answer, str) and answer.startswith("fertig")


def test_filesystem_backend_writes_a_real_file_under_root_dir(tmp_path: Path) -> None:
    agent = DeepAgent(llm=FunctionChatModel(_writer), backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True))
    agent.invoke("schreib", thread_id="t")
    assert (tmp_path / "notes.txt").read_text() == "hallo"


def test_approval_without_checkpointer_is_a_user_error() -> None:
    with pytest.raises(UserError, match="checkpointer"):
        DeepAgent(llm=FakeChatModel(["x"]), checkpointer=None, interrupt_on={"write_file": True})
    with pytest.raises(UserError, match="checkpointer"):
        DeepAgent(llm=FakeChatModel(["x"]), checkpointer=False, interrupt_on={"write_file": True})


def test_decision_with_input_and_missing_thread_id_are_user_errors() -> None:
    agent = DeepAgent(llm=FakeChatModel(["x"]), checkpointer=InMemorySaver())
    with pytest.raises(UserError, match="not both"):
        agent.invoke("hi", thread_id="t", decision="approve")
    with pytest.raises(UserError, match="not both"):
        list(agent.stream("hi", thread_id="t", decisions=["approve"]))
    with pytest.raises(UserError, match="thread_id"):
        agent.invoke("hi")


def test_without_checkpointer_runs_need_no_thread_id_and_have_nothing_pending() -> None:
    agent = DeepAgent(llm=FakeChatModel(["ohne"]), checkpointer=None)
    assert agent.invoke("hi") == "ohne"
    with pytest.raises(UserError, match="checkpointer"):
        agent.pending("t")


def test_bad_configuration_is_a_user_error() -> None:
    llm = FakeChatModel(["x"])
    with pytest.raises(UserError, match="send_mail"):
        DeepAgent(llm=llm, interrupt_on={"send_mail": True})
    with pytest.raises(UserError, match="backend"):
        DeepAgent(llm=llm, backend=StateBackend)
    with pytest.raises(UserError, match="backend"):
        DeepAgent(llm=llm, backend=lambda runtime: StateBackend())
    with pytest.raises(UserError, match="output"):
        DeepAgent(llm=llm, output=dict)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="decisions"):
        DeepAgent(llm=llm, interrupt_on={"write_file": {"decisions": ["maybe"]}})


def test_the_package_names_only_what_it_has() -> None:
    import ai_utils.deep

    assert ai_utils.deep.__all__ == sorted(ai_utils.deep.__all__)
    with pytest.raises(AttributeError, match="Nope"):
        ai_utils.deep.Nope  # noqa: B018


def test_a_model_string_goes_through_get_llm_not_deepagents_profiles() -> None:
    from ai_utils import get_llm

    agent = DeepAgent(
        llm="local:llama3.2:3b",
        subagents=[{"name": "helper", "description": "Helps.", "system_prompt": "Help.", "model": "local:qwen3:8b"}],
    )
    assert type(agent.llm) is type(get_llm("local", "llama3.2:3b"))
    assert agent.llm.model_name == "llama3.2:3b"  # type: ignore[attr-defined]
    assert agent.subagents is not None and agent.subagents[0]["model"].model_name == "qwen3:8b"
    # get_llm's own provider (not deepagents' init_chat_model), so its own message: the key it needs.
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        DeepAgent(llm="anthropic:claude-sonnet-4-6")
