from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite
from typing_extensions import TypedDict

from ai_utils.exceptions import ModelOutputError, UserError
from ai_utils.memory import (
    MemorySaver,
    achat_summarizer,
    aget_messages_array_from_checkpoint,
    chat_summarizer,
    format_checkpoint_messages_for_llm,
    get_messages_array_from_checkpoint,
    sqlite_saver,
)
from ai_utils.testing import FakeChatModel, FunctionChatModel, static_model

CONVERSATION = [
    SystemMessage("You are helpful."),
    HumanMessage("Weather in Paris and Rome?"),
    AIMessage(
        [{"type": "reasoning", "reasoning": "two cities"}, {"type": "text", "text": "Let me check."}],
        tool_calls=[
            {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"},
            {"name": "get_weather", "args": {"city": "Rome"}, "id": "c2"},
        ],
    ),
    ToolMessage("Sunny in Paris " + "x" * 50, tool_call_id="c1"),
    ToolMessage("Rain in Rome", tool_call_id="c2", name="weather_tool"),
    AIMessage("Paris is sunny, Rome is rainy."),
    ChatMessage("a custom role", role="critic"),
]


def test_transcript_shows_speakers_tool_calls_and_named_tool_results() -> None:
    text = format_checkpoint_messages_for_llm(CONVERSATION, max_tool_result_chars=20)
    assert text.splitlines() == [
        "System: You are helpful.",
        "User: Weather in Paris and Rome?",
        "Assistant: Let me check.",
        'Assistant called get_weather({"city": "Paris"})',
        'Assistant called get_weather({"city": "Rome"})',
        "Tool get_weather: Sunny in Paris xxxxx … [truncated 45 chars]",
        "Tool weather_tool: Rain in Rome",
        "Assistant: Paris is sunny, Rome is rainy.",
        "Chat: a custom role",
    ]
    assert "two cities" not in text  # reasoning is not part of the transcript


def test_transcript_keeps_tool_results_whole_without_a_limit_and_renders_empty_turns() -> None:
    text = format_checkpoint_messages_for_llm([AIMessage(""), ToolMessage("y" * 5000, tool_call_id="unknown")])
    assert text.splitlines() == ["Assistant: ", "Tool tool: " + "y" * 5000]
    assert format_checkpoint_messages_for_llm([]) == ""


def test_transcript_accepts_a_state_dict() -> None:
    assert format_checkpoint_messages_for_llm({"messages": [HumanMessage("hi")]}) == "User: hi"


@pytest.mark.parametrize("limit", [0, -1, 2.5, True, "10"])
def test_transcript_rejects_a_bad_tool_result_limit(limit: Any) -> None:
    with pytest.raises(UserError, match="max_tool_result_chars"):
        format_checkpoint_messages_for_llm(CONVERSATION, max_tool_result_chars=limit)


def test_messages_come_from_every_checkpoint_shape_of_an_agent_thread(tmp_path: Path) -> None:
    @tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"Sunny in {city}"

    saver = sqlite_saver(tmp_path / "cp.sqlite")
    model = FakeChatModel([{"tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]}, "Sunny."])
    agent = create_agent(model=model, tools=[get_weather], checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    result = agent.invoke({"messages": [("user", "Weather?")]}, config)
    expected = result["messages"]
    item = saver.get_tuple(config)
    assert item is not None

    assert get_messages_array_from_checkpoint(result) == expected
    assert get_messages_array_from_checkpoint(agent.get_state(config)) == expected
    assert get_messages_array_from_checkpoint(item) == expected
    assert get_messages_array_from_checkpoint(item.checkpoint) == expected
    assert get_messages_array_from_checkpoint(expected) == expected
    assert get_messages_array_from_checkpoint(tuple(expected)) == expected
    assert get_messages_array_from_checkpoint(expected[0]) == [expected[0]]
    assert get_messages_array_from_checkpoint(None) == []
    assert [type(m).__name__ for m in expected] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    saver.close()


def _plain(messages: Sequence[Any]) -> list[tuple[str, str]]:
    return [(m.type, str(m.text)) for m in messages]


def _delta_reducer(state: Sequence[Any] | None, writes: Sequence[Any]) -> list[Any]:
    messages: list[Any] = list(state or [])
    for write in writes:
        messages = add_messages(messages, write)  # type: ignore[assignment]
    return messages


def _delta_graph(snapshot_frequency: int) -> StateGraph[Any]:
    # functional form: the annotation must be evaluated here, where snapshot_frequency is bound
    channel = DeltaChannel(_delta_reducer, snapshot_frequency=snapshot_frequency)
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], channel]})  # noqa: UP013

    def echo(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo {len(state['messages'])}")]}

    graph = StateGraph(State)
    graph.add_node("echo", echo)
    graph.add_edge(START, "echo")
    graph.add_edge("echo", END)
    return graph


@pytest.mark.parametrize("snapshot_frequency", [100, 2])
async def test_delta_channel_threads_are_rebuilt_from_the_saver_at_every_checkpoint(snapshot_frequency: int) -> None:
    saver = MemorySaver()
    graph = _delta_graph(snapshot_frequency).compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "deep"}}
    for turn in range(3):
        graph.invoke({"messages": [("user", f"turn {turn}")]}, config)

    checked = 0
    for item in saver.list(config):
        expected = graph.get_state(item.config).values.get("messages", [])
        # raw ("user", text) inputs get a fresh message id on every replay, in LangGraph's get_state too
        assert _plain(get_messages_array_from_checkpoint(item, saver=saver)) == _plain(expected)
        assert _plain(await aget_messages_array_from_checkpoint(item, saver=saver)) == _plain(expected)
        checked += 1
    latest = saver.get_tuple(config)
    assert latest is not None and checked > 6
    assert [m.text for m in get_messages_array_from_checkpoint(latest, saver=saver)][-2:] == ["turn 2", "echo 5"]
    if snapshot_frequency == 100:  # between snapshots the checkpoint itself holds no messages: never a silent []
        with pytest.raises(UserError, match="saver="):
            get_messages_array_from_checkpoint(latest)
        with pytest.raises(UserError, match="saver="):
            await aget_messages_array_from_checkpoint(latest)


def test_delta_history_honours_removals_and_overwrites() -> None:
    saver = MemorySaver()
    graph = _delta_graph(100).compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "edit"}}
    graph.invoke({"messages": [HumanMessage("first", id="h1")]}, config)
    graph.update_state(config, {"messages": [RemoveMessage(id="h1")]})
    graph.invoke({"messages": [HumanMessage("second", id="h2")]}, config)
    graph.update_state(config, {"messages": Overwrite([HumanMessage("reset", id="h3")])})
    latest = saver.get_tuple(config)
    assert latest is not None

    rebuilt = get_messages_array_from_checkpoint(latest, saver=saver)

    assert rebuilt == graph.get_state(config).values["messages"]
    assert [m.text for m in rebuilt] == ["reset"]


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ({"channel_values": {"messages": "oops"}}, r"channel_values\['messages'\]"),
        ({"other": []}, "no 'messages' key"),
        ({"messages": [1, 2]}, r"state\['messages'\]"),
        (42, "not a list of messages"),
        ("x" * 500, r"\.\.\."),
    ],
)
def test_a_source_without_messages_is_refused_with_the_fix(source: Any, match: str) -> None:
    with pytest.raises(UserError, match=match):
        get_messages_array_from_checkpoint(source)


async def test_a_saver_that_is_not_a_checkpointer_is_refused() -> None:
    with pytest.raises(UserError, match="checkpoint saver"):
        get_messages_array_from_checkpoint([], saver="sqlite")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="checkpoint saver"):
        await aget_messages_array_from_checkpoint([], saver=object())  # type: ignore[arg-type]


def test_a_custom_messages_key_is_read() -> None:
    assert get_messages_array_from_checkpoint({"history": [HumanMessage("x")]}, key="history") == [HumanMessage("x")]


def test_chat_summarizer_merges_the_previous_summary_with_the_cut_transcript() -> None:
    model = static_model("Max plant eine Reise nach Rom.")

    summary = chat_summarizer(
        CONVERSATION, llm=model, previous_summary="  Der Nutzer heisst Max.  ", max_words=40, max_tool_result_chars=10
    )

    assert summary == "Max plant eine Reise nach Rom."
    system, prompt = model.calls[0]
    assert "ONE rolling summary" in str(system.text) and "at most 40 words" in str(system.text)
    assert str(prompt.text).startswith("Previous summary:\nDer Nutzer heisst Max.\n\nNew messages:\nSystem: ")
    assert "Tool get_weather: Sunny in P … [truncated" in str(prompt.text)


async def test_achat_summarizer_enforces_the_word_limit() -> None:
    long = " ".join(["wort"] * 50)
    model = FakeChatModel([long, long])

    summary = await achat_summarizer([HumanMessage("hi")], llm=model, max_words=5)

    assert summary == "wort wort wort wort wort"  # asked once more, then cut
    assert len(model.calls) == 2


def test_chat_summarizer_summarizes_only_a_previous_summary() -> None:
    model = static_model("kurz")
    assert chat_summarizer([], llm=model, previous_summary="alt") == "kurz"
    assert str(model.calls[0][1].text) == "Previous summary:\nalt\n\nNew messages: (none)"


def test_chat_summarizer_raises_when_the_model_keeps_replying_nothing() -> None:
    with pytest.raises(ModelOutputError):
        chat_summarizer([HumanMessage("hi")], llm=FunctionChatModel(lambda messages, tools: "   "))


def test_chat_summarizer_uses_get_llm_when_no_model_is_given(aimock: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "test-key")
    monkeypatch.setenv("OPENROUTER_BASE_URL", aimock.openrouter_base_url)
    aimock.add({"match": {"userMessage": "Ich heisse Max"}, "response": {"content": "Der Nutzer heisst Max."}})

    assert chat_summarizer([HumanMessage("Ich heisse Max")]) == "Der Nutzer heisst Max."
    assert "User: Ich heisse Max" in str(aimock.request_bodies()[0]["messages"][-1]["content"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"messages": "hello"}, "sequence of messages"),
        ({"messages": 5}, "sequence of messages"),
        ({"messages": ["hello"]}, "not a list of messages"),
        ({"messages": []}, "no messages and no previous summary"),
        ({"messages": [], "previous_summary": "  "}, "no messages and no previous summary"),
        ({"messages": [HumanMessage("x")], "previous_summary": 3}, "previous_summary"),
        ({"messages": [HumanMessage("x")], "max_words": 0}, "max_words"),
        ({"messages": [HumanMessage("x")], "max_tool_result_chars": 0}, "max_tool_result_chars"),
    ],
)
async def test_chat_summarizer_refuses_bad_arguments_before_any_model_call(kwargs: dict[str, Any], match: str) -> None:
    model = static_model("never")
    with pytest.raises(UserError, match=match):
        chat_summarizer(llm=model, **kwargs)
    with pytest.raises(UserError, match=match):
        await achat_summarizer(llm=model, **kwargs)
    assert model.calls == []


async def test_delta_threads_on_a_sqlite_saver_are_rebuilt_through_its_async_api(tmp_path: Path) -> None:
    saver = sqlite_saver(tmp_path / "cp.sqlite")
    graph = _delta_graph(100).compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "deep"}}
    for turn in range(2):
        await graph.ainvoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, config)
    latest = await saver.aget_tuple(config)
    assert latest is not None and "messages" not in latest.checkpoint["channel_values"]

    rebuilt = await aget_messages_array_from_checkpoint(latest, saver=saver)

    assert rebuilt == (await graph.aget_state(config)).values["messages"]
    assert [m.text for m in rebuilt] == ["turn 0", "echo 1", "turn 1", "echo 3"]
    saver.close()


class _OverwriteHistorySaver(MemorySaver):
    """A saver whose stored history contains an Overwrite write (LangGraph snapshots on Overwrite today,
    but DeltaChannel.replay_writes still accepts one, e.g. from other savers)."""

    def get_delta_channel_history(self, *, config: Any, channels: Sequence[str]) -> Any:
        writes = [
            ("t1", "messages", [HumanMessage("dropped", id="a")]),
            ("t2", "messages", Overwrite([HumanMessage("kept", id="b")])),
            ("t3", "messages", [AIMessage("after", id="c")]),
        ]
        return {"messages": {"writes": writes, "seed": [HumanMessage("seed", id="s")]}}


def test_an_overwrite_in_the_delta_history_resets_the_messages() -> None:
    saver = _OverwriteHistorySaver()
    graph = _delta_graph(100).compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "o"}}
    graph.invoke({"messages": [HumanMessage("x", id="x")]}, config)
    latest = saver.get_tuple(config)
    assert latest is not None

    assert [m.text for m in get_messages_array_from_checkpoint(latest, saver=saver)] == ["kept", "after"]


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return f"found {term}"


def _agent_thread(agent: Any, turns: int = 3) -> None:
    for turn in range(turns):
        agent.invoke(f"turn {turn}", thread_id="t")


@pytest.mark.parametrize("backend", ["memory", "sqlite", "smart"])
async def test_agent_threads_in_a_delta_channel_come_back_whole_with_the_saver(tmp_path: Path, backend: str) -> None:
    from ai_utils import Agent, SmartCheckpointSaver

    inner = sqlite_saver(tmp_path / "cp.sqlite") if backend == "sqlite" else MemorySaver()
    saver: Any = SmartCheckpointSaver(inner, llm=static_model("summary")) if backend == "smart" else inner
    call = {"tool_calls": [{"name": "lookup", "args": {"term": "x"}}]}
    agent = Agent(llm=FakeChatModel([call, "a", "b", "c"]), tools=[lookup], checkpointer=saver)
    _agent_thread(agent)
    expected = agent.get_state("t").values["messages"]
    assert [m.type for m in expected] == ["human", "ai", "tool", "ai", "human", "ai", "human", "ai"]
    config: Any = {"configurable": {"thread_id": "t"}}
    latest = saver.get_tuple(config)
    assert "messages" not in latest.checkpoint["channel_values"]  # the Agent keeps messages as deltas

    assert get_messages_array_from_checkpoint(latest, saver=saver) == expected
    assert await aget_messages_array_from_checkpoint(latest, saver=saver) == expected
    assert get_messages_array_from_checkpoint(latest.checkpoint, saver=saver, config=config) == expected
    assert get_messages_array_from_checkpoint(agent.get_state("t")) == expected
    with pytest.raises(UserError, match=r"CheckpointTuple stores 'messages' as a delta.*saver=saver"):
        get_messages_array_from_checkpoint(latest)
    with pytest.raises(UserError, match=r"checkpoint stores 'messages' as a delta.*config="):
        get_messages_array_from_checkpoint(latest.checkpoint, saver=saver)
    with pytest.raises(UserError, match="saver="):
        format_checkpoint_messages_for_llm(latest.checkpoint)
    first = list(saver.list(config))[-3]  # an older checkpoint of the thread: its own messages, not the latest
    assert get_messages_array_from_checkpoint(first, saver=saver) == agent.get_state(first.config).values["messages"]
    if backend == "sqlite":
        inner.close()  # type: ignore[attr-defined]


def test_deep_agent_threads_come_back_whole_with_the_saver() -> None:
    from ai_utils import DeepAgent

    saver = MemorySaver()
    agent = DeepAgent(llm=FakeChatModel(["a", "b"]), checkpointer=saver)
    _agent_thread(agent, turns=2)
    latest = saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert latest is not None
    assert _plain(get_messages_array_from_checkpoint(latest, saver=saver)) == [
        ("human", "turn 0"),
        ("ai", "a"),
        ("human", "turn 1"),
        ("ai", "b"),
    ]
