"""`SmartCheckpointSaver` on real `create_agent` graphs: budget, tool units, fail-open, raw history."""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import AgentState, create_agent
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph.message import _messages_delta_reducer

from ai_utils.exceptions import UserError
from ai_utils.memory._tool_units import estimate_tokens
from ai_utils.memory.smart import SmartCheckpointSaver
from ai_utils.testing import FunctionChatModel, static_model


class DeltaState(AgentState):  # type: ignore[type-arg]
    """Agent state whose messages live in a LangGraph DeltaChannel, as deepagents stores them."""

    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer, snapshot_frequency=50)]


SCHEMAS = pytest.mark.parametrize("schema", [AgentState, DeltaState], ids=["add_messages", "delta_channel"])

TOOL_RESULT = "The archive says: " + "lorem ipsum " * 40


@tool
def lookup(query: str) -> str:
    """Look something up in the archive."""
    return f"{TOOL_RESULT} ({query})"


def violations(messages: Sequence[BaseMessage]) -> list[str]:
    """Everything a provider would reject or a user would lose: orphans, unanswered calls, two summaries."""
    found: list[str] = []
    calls: set[str] = set()
    answered: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            calls.update(str(call["id"]) for call in message.tool_calls)
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in calls:
                found.append(f"orphaned ToolMessage {message.tool_call_id} at {index}")
            answered.add(message.tool_call_id)
    found.extend(f"tool call {call} without result" for call in sorted(calls - answered))
    summaries = [i for i, m in enumerate(messages) if isinstance(m, SystemMessage) and "Rolling summary" in m.text]
    if len(summaries) > 1:
        found.append(f"{len(summaries)} summary messages")
    if summaries and any(not isinstance(m, SystemMessage) for m in messages[: summaries[0]]):
        found.append("summary comes after the conversation started")
    return found


class Conversation:
    """A scripted user + model: a tool turn (two parallel calls) every other turn, text otherwise."""

    def __init__(self) -> None:
        self.turn = 0
        self.inputs: list[list[BaseMessage]] = []
        self.violations: list[str] = []

    def reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        self.inputs.append(list(messages))
        self.violations.extend(f"turn {self.turn}: {v}" for v in violations(messages))
        if isinstance(messages[-1], ToolMessage):
            return f"Turn {self.turn}: the archive answered both queries."
        if self.turn % 2 == 0:
            calls = [{"name": "lookup", "args": {"query": f"q{self.turn}-{side}"}} for side in ("a", "b")]
            return {"content": "", "tool_calls": calls}
        return f"Turn {self.turn}: a plain answer. " + "words " * 15

    def user(self) -> dict[str, Any]:
        self.turn += 1
        return {"messages": [HumanMessage(f"User message {self.turn}")]}


class Summarizer:
    """A summarizer model that records its prompts and numbers its summaries."""

    def __init__(self, *, fail: bool = False) -> None:
        self.prompts: list[str] = []
        self.fail = fail

    def reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        if self.fail:
            raise RuntimeError("summarizer is down")
        self.prompts.append("\n".join(str(m.text) for m in messages))
        return f"Rolling summary number {len(self.prompts)}."


def _config(thread: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _turn_sizes(raw: Sequence[BaseMessage]) -> list[int]:
    sizes: list[int] = []
    for message in raw:
        if isinstance(message, HumanMessage):
            sizes.append(0)
        sizes[-1] += estimate_tokens(message)
    return sizes


def _assert_verbatim_tail(inputs: list[list[BaseMessage]], raw: list[BaseMessage], keep: int) -> None:
    position = {m.id: index for index, m in enumerate(raw)}
    for call in inputs:
        body = [m for m in call if not isinstance(m, SystemMessage)]
        start = position[body[0].id]
        assert [m.id for m in body] == [m.id for m in raw[start : start + len(body)]]
        assert [m.text for m in body] == [m.text for m in raw[start : start + len(body)]]
        turn_messages = [m for m in body if m.type in ("human", "ai")]
        available = [m for m in raw[: start + len(body)] if m.type in ("human", "ai")]
        assert len(turn_messages) >= min(keep, len(available))


@SCHEMAS
def test_two_hundred_turns_stay_in_budget_without_orphans_and_keep_the_tail_verbatim(schema: type) -> None:
    conversation, summarizer = Conversation(), Summarizer()
    saver = SmartCheckpointSaver(
        InMemorySaver(),
        llm=FunctionChatModel(summarizer.reply),
        max_tokens=1_500,
        messages_before_summary=40,
        keep_last_messages=4,
    )
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver, state_schema=schema)

    for _ in range(200):
        agent.invoke(conversation.user(), _config())

    raw = saver.get_raw_history(_config())
    assert conversation.violations == []
    assert [m.text for m in raw if isinstance(m, HumanMessage)] == [f"User message {n}" for n in range(1, 201)]
    assert len(raw) == 100 * 5 + 100 * 2
    bound = 1_500 + max(_turn_sizes(raw))
    sent = [sum(estimate_tokens(m) for m in call) for call in conversation.inputs]
    assert max(sent) <= bound
    prefix_tokens = [0]
    for message in raw:
        prefix_tokens.append(prefix_tokens[-1] + estimate_tokens(message))
    naive = [prefix_tokens[raw.index(call[-1]) + 1] for call in conversation.inputs]
    assert sum(sent) < 0.3 * sum(naive)
    assert 20 <= len(summarizer.prompts) <= 60
    _assert_verbatim_tail(conversation.inputs, raw, keep=4)
    snapshot = agent.get_state(_config())
    compactions = [s for s in agent.get_state_history(_config()) if s.metadata and s.metadata["source"] == "update"]
    assert len(compactions) == len(summarizer.prompts)
    assert all(s.next == () for s in compactions)
    calls_before = len(conversation.inputs)
    agent.invoke(None, _config())  # nothing is due after a compaction: no model call
    assert len(conversation.inputs) == calls_before
    final = snapshot.values["messages"]
    assert isinstance(final[0], SystemMessage)
    assert final[0].text.endswith(f"Rolling summary number {len(summarizer.prompts)}.")


def _consecutive_parallel_history() -> list[BaseMessage]:
    """Two AI messages whose tool calls are answered only after both: `AI(a, b), AI(c), Tool(a), Tool(c), Tool(b)`."""
    return [
        HumanMessage("Compare the three reports.", id="h1"),
        AIMessage(
            "",
            id="ai1",
            tool_calls=[
                {"name": "lookup", "args": {"query": "a"}, "id": "a"},
                {"name": "lookup", "args": {"query": "b"}, "id": "b"},
            ],
        ),
        AIMessage("", id="ai2", tool_calls=[{"name": "lookup", "args": {"query": "c"}, "id": "c"}]),
        ToolMessage("report a", tool_call_id="a", id="ta"),
        ToolMessage("report c", tool_call_id="c", id="tc"),
        ToolMessage("report b", tool_call_id="b", id="tb"),
        AIMessage("All three reports agree.", id="ai3"),
    ]


@SCHEMAS
@pytest.mark.parametrize("keep", [1, 2, 3, 4])
def test_adjacent_tool_results_of_consecutive_ai_messages_are_never_cut_apart(schema: type, keep: int) -> None:
    conversation, summarizer = Conversation(), Summarizer()
    conversation.turn = 1  # odd turns answer with text
    saver = SmartCheckpointSaver(
        InMemorySaver(),
        llm=FunctionChatModel(summarizer.reply),
        max_tokens=10,
        messages_before_summary=keep + 1,
        keep_last_messages=keep,
    )
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver, state_schema=schema)

    agent.invoke({"messages": [*_consecutive_parallel_history(), HumanMessage("And now?", id="h2")]}, _config())
    agent.invoke({"messages": [HumanMessage("One more question.", id="h3")]}, _config())

    assert len(summarizer.prompts) >= 1
    assert conversation.violations == []
    second_call = conversation.inputs[-1]
    ids = [m.id for m in second_call if not isinstance(m, SystemMessage)]
    if "ta" in ids or "tc" in ids or "tb" in ids:
        assert {"ai1", "ai2", "ta", "tb", "tc"} <= set(ids)


@SCHEMAS
async def test_async_runs_over_sqlite_compact_and_keep_the_raw_history(schema: type, tmp_path: Path) -> None:
    conversation, summarizer = Conversation(), Summarizer()
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "threads.sqlite")) as inner:
        saver = SmartCheckpointSaver(
            inner, llm=FunctionChatModel(summarizer.reply), max_tokens=800, messages_before_summary=8
        )
        agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver, state_schema=schema)

        for _ in range(30):
            await agent.ainvoke(conversation.user(), _config())
        raw = await saver.aget_raw_history(_config())
        state = await agent.aget_state(_config())

    assert conversation.violations == []
    assert len(summarizer.prompts) >= 5
    assert [m.text for m in raw if isinstance(m, HumanMessage)] == [f"User message {n}" for n in range(1, 31)]
    assert not any(isinstance(m, SystemMessage) for m in raw)
    messages = state.values["messages"]
    assert isinstance(messages[0], SystemMessage)
    assert len(messages) < 20
    _assert_verbatim_tail(conversation.inputs, raw, keep=4)


@SCHEMAS
def test_a_failing_summarizer_leaves_the_thread_usable_and_unchanged(
    schema: type, caplog: pytest.LogCaptureFixture
) -> None:
    conversation = Conversation()
    saver = SmartCheckpointSaver(
        InMemorySaver(), llm=FunctionChatModel(Summarizer(fail=True).reply), max_tokens=100, messages_before_summary=5
    )
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver, state_schema=schema)

    with caplog.at_level(logging.DEBUG, logger="ai_utils.memory"):  # WARNING once per process, then DEBUG
        for _ in range(6):
            agent.invoke(conversation.user(), _config())

    messages = agent.get_state(_config()).values["messages"]
    assert conversation.violations == []
    assert [m.text for m in messages if isinstance(m, HumanMessage)] == [f"User message {n}" for n in range(1, 7)]
    assert not any(isinstance(m, SystemMessage) for m in messages)
    assert [m.id for m in conversation.inputs[-1]] == [m.id for m in messages[:-1]]
    assert "summarizer is down" in caplog.text
    assert "stored unchanged" in caplog.text


@SCHEMAS
def test_no_summary_while_a_tool_call_waits_for_approval(schema: type) -> None:
    conversation, summarizer = Conversation(), Summarizer()
    saver = SmartCheckpointSaver(
        InMemorySaver(),
        llm=FunctionChatModel(summarizer.reply),
        max_tokens=10,
        messages_before_summary=2,
        keep_last_messages=1,
    )
    agent = create_agent(
        FunctionChatModel(conversation.reply),
        [lookup],
        checkpointer=saver,
        state_schema=schema,
        interrupt_before=["tools"],
    )
    conversation.turn = 1
    agent.invoke({"messages": [HumanMessage("Tell me a story.")]}, _config())  # text turn: summarized
    calls_after_first_turn = len(summarizer.prompts)
    agent.invoke(conversation.user(), _config())  # turn 2 asks for tools and stops before running them

    paused = agent.get_state(_config())
    assert set(paused.next) == {"tools"}
    assert len(summarizer.prompts) == calls_after_first_turn
    assert paused.values["messages"][-1].tool_calls

    agent.invoke(None, _config())

    assert len(summarizer.prompts) == calls_after_first_turn + 1
    assert conversation.violations == []
    final = agent.get_state(_config()).values["messages"]
    assert final[-1].text == "Turn 2: the archive answered both queries."
    assert violations(final) == []


def test_tool_results_are_cut_in_the_summarizer_input() -> None:
    conversation, summarizer = Conversation(), Summarizer()
    saver = SmartCheckpointSaver(
        InMemorySaver(),
        llm=FunctionChatModel(summarizer.reply),
        max_tokens=100,
        messages_before_summary=5,
        keep_last_messages=1,
        max_tool_result_chars=40,
        max_summary_words=50,
    )
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver)

    for _ in range(4):
        agent.invoke(conversation.user(), _config())

    prompt = summarizer.prompts[0]
    assert "The archive says: lorem ipsum lorem ipsu" in prompt
    assert TOOL_RESULT[:80] not in prompt
    assert "truncated" in prompt
    assert "at most 50 words" in prompt


@SCHEMAS
def test_a_fresh_saver_over_an_existing_thread_recounts_it_and_compacts(schema: type) -> None:
    inner = InMemorySaver()
    conversation = Conversation()
    first = SmartCheckpointSaver(inner, llm=static_model("unused"), max_tokens=100_000, messages_before_summary=100)
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=first, state_schema=schema)
    for _ in range(6):
        agent.invoke(conversation.user(), _config())

    summarizer = Summarizer()
    restarted = SmartCheckpointSaver(inner, llm=FunctionChatModel(summarizer.reply), max_tokens=400)
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=restarted, state_schema=schema)
    agent.invoke(conversation.user(), _config())

    assert len(summarizer.prompts) == 1
    assert "User message 1" in summarizer.prompts[0]
    messages = agent.get_state(_config()).values["messages"]
    assert isinstance(messages[0], SystemMessage)
    assert [m.text for m in restarted.get_raw_history(_config()) if isinstance(m, HumanMessage)] == [
        f"User message {n}" for n in range(1, 8)
    ]


@SCHEMAS
def test_threads_under_budget_are_stored_exactly_as_by_the_inner_saver(schema: type) -> None:
    results = []
    for checkpointer in (InMemorySaver(), SmartCheckpointSaver(InMemorySaver(), llm=static_model("never"))):
        conversation = Conversation()
        agent = create_agent(
            FunctionChatModel(conversation.reply), [lookup], checkpointer=checkpointer, state_schema=schema
        )
        for _ in range(4):
            agent.invoke(conversation.user(), _config())
        history = list(agent.get_state_history(_config()))
        results.append(([s.metadata["source"] for s in history], agent.get_state(_config()).values["messages"]))

    assert results[0][0] == results[1][0]
    assert [m.text for m in results[0][1]] == [m.text for m in results[1][1]]


def test_the_llm_is_created_only_when_the_first_summary_is_due(caplog: pytest.LogCaptureFixture) -> None:
    conversation = Conversation()
    conversation.turn = 1
    saver = SmartCheckpointSaver(InMemorySaver(), max_tokens=100_000, messages_before_summary=5)
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver)

    agent.invoke({"messages": [HumanMessage("hi")]}, _config())  # under budget: no llm, no API key needed
    with caplog.at_level(logging.DEBUG, logger="ai_utils.memory"):
        for _ in range(3):
            agent.invoke(conversation.user(), _config())

    assert "OPENROUTER_API_KEY" in caplog.text  # get_llm() ran at the first summary and failed open
    assert len(agent.get_state(_config()).values["messages"]) > 5


def test_debug_logs_token_counts_triggers_and_summaries(caplog: pytest.LogCaptureFixture) -> None:
    conversation = Conversation()
    saver = SmartCheckpointSaver(
        InMemorySaver(), llm=static_model("They talked about the archive."), max_tokens=300, debug=True
    )
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver)

    with caplog.at_level(logging.INFO, logger="ai_utils.memory"):
        agent.invoke(conversation.user(), _config())
        agent.invoke(conversation.user(), _config())

    assert "under budget" in caplog.text
    assert "(max 300)" in caplog.text
    assert "summarizing" in caplog.text
    assert "They talked about the archive." in caplog.text


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"max_tokens": 0}, "max_tokens must be an int >= 1"),
        ({"keep_last_messages": 1.5}, "keep_last_messages must be an int >= 1"),
        ({"max_summary_words": True}, "max_summary_words must be an int >= 1"),
        ({"messages_before_summary": 4, "keep_last_messages": 4}, "must be greater than keep_last_messages"),
    ],
)
def test_bad_settings_are_rejected_with_the_fix(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        SmartCheckpointSaver(InMemorySaver(), **kwargs)


def test_inner_must_be_a_checkpoint_saver() -> None:
    with pytest.raises(UserError, match="inner must be a LangGraph checkpoint saver, got dict"):
        SmartCheckpointSaver({})  # type: ignore[arg-type]


async def test_async_runs_fail_open_when_the_summarizer_raises(caplog: pytest.LogCaptureFixture) -> None:
    conversation = Conversation()
    saver = SmartCheckpointSaver(
        InMemorySaver(), llm=FunctionChatModel(Summarizer(fail=True).reply), max_tokens=100, messages_before_summary=5
    )
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver, state_schema=DeltaState)

    with caplog.at_level(logging.DEBUG, logger="ai_utils.memory"):  # WARNING once per process, then DEBUG
        for _ in range(4):
            await agent.ainvoke(conversation.user(), _config())

    messages = (await agent.aget_state(_config())).values["messages"]
    assert [m.text for m in messages if isinstance(m, HumanMessage)] == [f"User message {n}" for n in range(1, 5)]
    assert "summarizer is down" in caplog.text


@SCHEMAS
def test_a_fresh_saver_over_a_thread_under_budget_leaves_it_alone(schema: type) -> None:
    inner = InMemorySaver()
    conversation, summarizer = Conversation(), Summarizer()
    for _ in range(2):  # a new saver each turn, as after a restart
        saver = SmartCheckpointSaver(inner, llm=FunctionChatModel(summarizer.reply), max_tokens=100_000)
        agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver, state_schema=schema)
        agent.invoke(conversation.user(), _config())

    assert summarizer.prompts == []
    assert len(agent.get_state(_config()).values["messages"]) == 7


def test_every_saver_method_reaches_the_inner_saver() -> None:
    inner = InMemorySaver()
    saver = SmartCheckpointSaver(inner, llm=static_model("summary"), max_tokens=50, messages_before_summary=5)
    agent = create_agent(FunctionChatModel(Conversation().reply), [lookup], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("hi")]}, _config("a"))
    agent.invoke({"messages": [HumanMessage("hi")]}, _config("b"))

    assert saver.inner is inner
    assert saver.serde is inner.serde
    assert saver.config_specs == inner.config_specs
    assert saver.get_next_version(None, None).startswith(inner.get_next_version(None, None).split(".")[0])
    assert "max_tokens=50" in repr(saver)
    assert [t.config for t in saver.list(_config("a"))] == [t.config for t in inner.list(_config("a"))]
    assert saver.get_tuple(_config("a")) == inner.get_tuple(_config("a"))
    saver.delete_thread("a")
    assert inner.get_tuple(_config("a")) is None
    assert saver.get_raw_history(_config("a")) == []
    assert inner.get_tuple(_config("b")) is not None


def test_with_allowlist_gives_a_smart_clone_over_the_inner_clone_sharing_llm_and_counters() -> None:
    class CloningSaver(InMemorySaver):
        def with_allowlist(self, extra_allowlist: Any) -> CloningSaver:
            return copy.copy(self)

    inner = CloningSaver()
    summarizer = Summarizer()
    saver = SmartCheckpointSaver(inner, llm=FunctionChatModel(summarizer.reply), max_tokens=100, keep_last_messages=2)
    clone = saver.with_allowlist({("my_module", "MyType")})

    assert isinstance(clone, SmartCheckpointSaver)
    assert clone.inner is not inner
    assert (clone.max_tokens, clone.keep_last_messages) == (100, 2)
    assert SmartCheckpointSaver(InMemorySaver()).with_allowlist(set()).inner.__class__ is InMemorySaver
    conversation = Conversation()
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver)  # compiles a clone
    for _ in range(3):
        agent.invoke(conversation.user(), _config())
    assert len(summarizer.prompts) >= 1
    assert [m.text for m in saver.get_raw_history(_config()) if isinstance(m, HumanMessage)] == [
        "User message 1",
        "User message 2",
        "User message 3",
    ]


async def test_async_delegation_reaches_the_inner_saver() -> None:
    inner = InMemorySaver()
    saver = SmartCheckpointSaver(inner, llm=static_model("summary"))
    agent = create_agent(FunctionChatModel(Conversation().reply), [lookup], checkpointer=saver, state_schema=DeltaState)
    await agent.ainvoke({"messages": [HumanMessage("hi")]}, _config())

    tuples = [t async for t in saver.alist(_config())]
    assert [t.config for t in tuples] == [t.config for t in inner.list(_config())]
    history = await saver.aget_delta_channel_history(config=tuples[0].config, channels=["messages"])
    assert history == inner.get_delta_channel_history(config=tuples[0].config, channels=["messages"])
    await saver.adelete_thread("t1")
    assert await saver.aget_tuple(_config()) is None


@SCHEMAS
@pytest.mark.parametrize("durability", ["sync", "exit"])
def test_every_durability_mode_compacts(schema: type, durability: str) -> None:
    conversation, summarizer = Conversation(), Summarizer()
    saver = SmartCheckpointSaver(
        InMemorySaver(), llm=FunctionChatModel(summarizer.reply), max_tokens=600, messages_before_summary=100
    )
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver, state_schema=schema)

    for _ in range(12):
        agent.invoke(conversation.user(), _config(), durability=durability)  # type: ignore[arg-type]

    assert len(summarizer.prompts) >= 2
    assert conversation.violations == []
    assert max(sum(estimate_tokens(m) for m in call) for call in conversation.inputs) <= 600 + 300


def test_deepagents_threads_are_compacted() -> None:
    from deepagents import create_deep_agent

    conversation, summarizer = Conversation(), Summarizer()
    saver = SmartCheckpointSaver(
        InMemorySaver(), llm=FunctionChatModel(summarizer.reply), max_tokens=3_000, messages_before_summary=8
    )
    agent = create_deep_agent(model=FunctionChatModel(conversation.reply), tools=[lookup], checkpointer=saver)

    for _ in range(12):
        agent.invoke(conversation.user(), _config())

    assert conversation.violations == []
    assert len(summarizer.prompts) >= 2
    snapshot = agent.get_state(_config())
    assert snapshot.next == ()
    state = snapshot.values["messages"]
    assert isinstance(state[0], SystemMessage)
    assert "Rolling summary number" in state[0].text
    assert sum(isinstance(m, SystemMessage) for m in state) == 1
    assert any("Rolling summary number" in m.text for m in conversation.inputs[-1])
    assert [m.text for m in saver.get_raw_history(_config()) if isinstance(m, HumanMessage)] == [
        f"User message {n}" for n in range(1, 13)
    ]


def test_a_budget_smaller_than_the_kept_tail_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    conversation = Conversation()
    saver = SmartCheckpointSaver(InMemorySaver(), llm=static_model("short"), max_tokens=50, keep_last_messages=4)
    agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver)

    with caplog.at_level(logging.DEBUG, logger="ai_utils.memory"):
        for _ in range(3):
            agent.invoke(conversation.user(), _config())

    assert "more than max_tokens=50" in caplog.text
    assert "Raise max_tokens or lower keep_last_messages" in caplog.text


@SCHEMAS
async def test_sync_and_async_turns_share_a_thread_over_the_sqlite_saver(schema: type, tmp_path: Path) -> None:
    from ai_utils.memory.sqlite import sqlite_saver

    conversation, summarizer = Conversation(), Summarizer()
    with sqlite_saver(tmp_path / "threads.sqlite") as inner:
        saver = SmartCheckpointSaver(
            inner, llm=FunctionChatModel(summarizer.reply), max_tokens=700, messages_before_summary=8
        )
        agent = create_agent(FunctionChatModel(conversation.reply), [lookup], checkpointer=saver, state_schema=schema)
        for turn in range(16):
            if turn % 2:
                await agent.ainvoke(conversation.user(), _config())
            else:
                agent.invoke(conversation.user(), _config())
        raw = await saver.aget_raw_history(_config())

    assert conversation.violations == []
    assert len(summarizer.prompts) >= 3
    assert [m.text for m in raw if isinstance(m, HumanMessage)] == [f"User message {n}" for n in range(1, 17)]
    _assert_verbatim_tail(conversation.inputs, raw, keep=4)


def test_two_hundred_turns_through_ai_utils_agent_stay_in_budget_without_orphans() -> None:
    from ai_utils import Agent

    conversation, summarizer = Conversation(), Summarizer()
    saver = SmartCheckpointSaver(
        InMemorySaver(),
        llm=FunctionChatModel(summarizer.reply),
        max_tokens=1_500,
        messages_before_summary=40,
        keep_last_messages=4,
    )
    agent = Agent(llm=FunctionChatModel(conversation.reply), tools=[lookup], checkpointer=saver)

    for _ in range(200):
        agent.invoke(conversation.user()["messages"][0].text, thread_id="t1")

    raw = saver.get_raw_history(_config())
    assert conversation.violations == []
    assert [m.text for m in raw if isinstance(m, HumanMessage)] == [f"User message {n}" for n in range(1, 201)]
    bound = 1_500 + max(_turn_sizes(raw))
    assert max(sum(estimate_tokens(m) for m in call) for call in conversation.inputs) <= bound
    assert 20 <= len(summarizer.prompts) <= 60
    _assert_verbatim_tail(conversation.inputs, raw, keep=4)
