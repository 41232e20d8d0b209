"""`Agent` and `DeepAgent` are LangChain `Runnable`s: LCEL composition, batch, astream_events, retry, fallbacks."""

from __future__ import annotations

import asyncio
import threading
import warnings
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from ai_utils import Agent, DeepAgent, UserError
from ai_utils.testing import FakeChatModel, FunctionChatModel

PROMPT = ChatPromptTemplate.from_messages([("system", "Answer in {lang}."), ("human", "{question}")])


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def echo_model() -> FunctionChatModel:
    """Answers with the text of the last human message, upper-cased."""

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        return next(m.text for m in reversed(messages) if isinstance(m, HumanMessage)).upper()

    return FunctionChatModel(reply)


def calculator() -> FunctionChatModel:
    """Calls ``add`` once per turn, then answers with its result."""

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        if isinstance(messages[-1], ToolMessage):
            return f"The sum is {messages[-1].text}."
        return {"tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]}

    return FunctionChatModel(reply)


class Recorder(BaseCallbackHandler):
    """What a caller's callback handler sees of a run."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.metadata: list[dict[str, Any]] = []
        self.tags: list[list[str]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.events.append(("chat", ""))
        self.metadata.append(dict(kwargs.get("metadata") or {}))
        self.tags.append(list(kwargs.get("tags") or []))

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        self.events.append(("tool", str(serialized.get("name"))))


def test_an_agent_is_a_runnable_with_its_own_name_and_schemas() -> None:
    class Weather(BaseModel):
        celsius: float

    agent = Agent(llm=echo_model(), name="helper")
    typed = Agent(llm=FakeChatModel(['{"celsius": 21.5}']), output=Weather)

    assert isinstance(agent, Runnable)
    assert agent.get_name() == "helper"
    assert typed.get_name() == "Agent"
    assert "anyOf" in agent.input_schema.model_json_schema()
    assert "Weather" in typed.output_schema.model_json_schema()["$defs"]
    assert "model" in agent.get_graph().nodes  # the compiled graph's drawing


def test_a_prompt_template_pipes_into_an_agent_and_its_text_into_a_parser() -> None:
    model = echo_model()
    chain = PROMPT | Agent(llm=model) | StrOutputParser()

    assert chain.invoke({"lang": "German", "question": "hello there"}) == "HELLO THERE"
    assert "".join(chain.stream({"lang": "German", "question": "streamed"})) == "STREAMED"
    sent = model.calls[0]
    assert isinstance(sent[0], SystemMessage) and sent[0].text == "Answer in German."
    assert isinstance(sent[1], HumanMessage) and sent[1].text == "hello there"


async def test_the_async_pipe_and_batch_run_every_input() -> None:
    chain = PROMPT | Agent(llm=echo_model()) | StrOutputParser()

    assert await chain.ainvoke({"lang": "en", "question": "one"}) == "ONE"
    answers = await chain.abatch([{"lang": "en", "question": q} for q in ("a", "b", "c")])
    assert answers == ["A", "B", "C"]


def test_batch_answers_in_order_and_returns_exceptions_when_asked() -> None:
    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        text = messages[-1].text
        if text == "boom":
            raise ValueError("the provider failed")
        return text.upper()

    agent = Agent(llm=FunctionChatModel(reply))

    assert agent.batch(["x", "y", "z"]) == ["X", "Y", "Z"]
    results = agent.batch(["x", "boom", "z"], return_exceptions=True)
    assert results[0] == "X" and results[2] == "Z"
    assert isinstance(results[1], ValueError)
    with pytest.raises(ValueError, match="provider failed"):
        agent.batch(["x", "boom"])


def test_batch_honours_max_concurrency_from_the_config() -> None:
    lock = threading.Lock()
    running = {"now": 0, "most": 0}
    release = threading.Event()

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        with lock:
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
        release.wait(0.05)  # overlap the runs if the batch ran them together
        with lock:
            running["now"] -= 1
        return "ok"

    agent = Agent(llm=FunctionChatModel(reply))

    assert agent.batch(["a", "b", "c", "d"], config={"max_concurrency": 1}) == ["ok"] * 4
    assert running["most"] == 1


def test_batch_takes_one_config_per_input_for_threads() -> None:
    agent = Agent(llm=FakeChatModel(["first", "second", "third"]), checkpointer=InMemorySaver())

    agent.batch(
        ["hi alice", "hi bob"],
        [{"configurable": {"thread_id": "alice"}}, {"configurable": {"thread_id": "bob"}}],
        return_exceptions=False,
    )
    agent.invoke("again", {"configurable": {"thread_id": "alice"}})

    alice = [m.text for m in agent.get_state("alice").values["messages"]]
    bob = [m.text for m in agent.get_state("bob").values["messages"]]
    assert alice[0] == "hi alice" and alice[2] == "again" and len(alice) == 4
    assert bob[0] == "hi bob" and len(bob) == 2


async def test_astream_events_shows_the_model_and_tool_events_inside_the_agent_run() -> None:
    agent = Agent(llm=calculator(), tools=[add], name="calc")

    events = [event async for event in agent.astream_events("what is 2 + 3?", version="v2")]

    root = events[0]
    assert (root["event"], root["name"]) == ("on_chain_start", "calc")
    kinds = [(e["event"], e["name"]) for e in events]
    assert kinds.count(("on_chat_model_start", "FunctionChatModel")) == 2
    assert ("on_tool_start", "add") in kinds and ("on_tool_end", "add") in kinds
    assert kinds[-1] == ("on_chain_end", "calc")
    inner = [e for e in events if e["event"] in ("on_chat_model_start", "on_tool_start")]
    assert all(root["run_id"] in e["parent_ids"] for e in inner)
    tool_end = next(e for e in events if e["event"] == "on_tool_end")
    assert tool_end["data"]["output"].content == "5"
    # The agent's own stream events carry our chunks (the answer text).
    chunks = [e["data"]["chunk"] for e in events if e["event"] == "on_chain_stream" and e["run_id"] == root["run_id"]]
    assert "".join(c for c in chunks if isinstance(c, str)) == "The sum is 5."


async def test_astream_events_over_an_unnamed_agent_names_the_run_after_the_class() -> None:
    events = [e async for e in Agent(llm=echo_model()).astream_events("hi", version="v2")]

    assert (events[0]["name"], events[-1]["name"]) == ("Agent", "Agent")


def _fails_twice(calls: dict[str, int]) -> Any:
    """A model function whose first two calls fail as an unreachable provider; counts calls in ``calls["n"]``."""

    def flaky(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError("provider unreachable")
        return "finally"

    return flaky


def _broken(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
    raise ValueError("model down")


def test_with_retry_runs_the_turn_again_after_a_failing_model_call() -> None:
    calls = {"n": 0}
    flaky = _fails_twice(calls)

    agent = Agent(llm=FunctionChatModel(flaky))
    retrying = agent.with_retry(
        retry_if_exception_type=(ConnectionError,), stop_after_attempt=3, wait_exponential_jitter=False
    )

    assert retrying.invoke("hi") == "finally"
    assert calls["n"] == 3
    calls["n"] = -10  # the next attempts fail past the limit
    with pytest.raises(ConnectionError):
        agent.with_retry(stop_after_attempt=2, wait_exponential_jitter=False).invoke("hi")


async def test_with_fallbacks_answers_from_the_next_agent_when_the_first_fails() -> None:
    primary = Agent(llm=FunctionChatModel(_broken))
    backup = Agent(llm=FakeChatModel(["from the backup"] * 2))
    both = primary.with_fallbacks([backup])

    assert await asyncio.to_thread(both.invoke, "hi") == "from the backup"
    assert await both.ainvoke("hi") == "from the backup"


def test_with_config_callbacks_tags_and_metadata_reach_the_inner_calls() -> None:
    recorder = Recorder()
    agent = Agent(llm=calculator(), tools=[add])

    configured = agent.with_config(callbacks=[recorder], tags=["team-a"], metadata={"tenant": "acme"})
    assert configured.invoke("sum it") == "The sum is 5."

    assert recorder.events == [("chat", ""), ("tool", "add"), ("chat", "")]
    assert all(m.get("tenant") == "acme" for m in recorder.metadata)
    assert all("team-a" in tags for tags in recorder.tags)


def test_bind_fixes_run_options_for_a_pipe() -> None:
    agent = Agent(llm=FakeChatModel(["one", "two"]), checkpointer=InMemorySaver())

    bound = agent.bind(thread_id="bound")
    bound.invoke("first")
    bound.invoke("second")

    assert len(agent.get_state("bound").values["messages"]) == 4


def test_a_pipe_does_not_cut_the_agent_to_langchains_default_recursion_limit() -> None:
    rounds = {"n": 0}

    def many_rounds(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        if rounds["n"] < 15:  # 15 tool rounds: 31 graph steps, past LangChain's default limit of 25
            rounds["n"] += 1
            return {"tool_calls": [{"name": "add", "args": {"a": rounds["n"], "b": 1}}]}
        return "done"

    chain = PROMPT | Agent(llm=FunctionChatModel(many_rounds), tools=[add], max_iterations=None) | StrOutputParser()

    assert chain.invoke({"lang": "en", "question": "count"}) == "done"
    assert rounds["n"] == 15


def test_a_thread_id_in_both_the_options_and_the_config_must_agree() -> None:
    agent = Agent(llm=FakeChatModel(["ok"] * 4), checkpointer=InMemorySaver())

    with pytest.raises(UserError, match=r"thread_id='a'.*'b'.*name different threads") as caught:
        agent.invoke("hi", {"configurable": {"thread_id": "b"}}, thread_id="a")
    assert "Agent.invoke" in str(caught.value)
    with pytest.raises(UserError, match="name different threads"):
        list(agent.stream("hi", config={"configurable": {"thread_id": "b"}}, thread_id="a"))
    assert agent.get_state("a").values == {} and agent.get_state("b").values == {}  # nothing ran

    assert agent.invoke("hi", {"configurable": {"thread_id": "same"}}, thread_id="same") == "ok"
    assert agent.invoke("again", {"configurable": {"thread_id": "same"}}) == "ok"
    assert len(agent.get_state("same").values["messages"]) == 4


def test_a_thread_id_passed_where_the_config_goes_is_refused_naming_thread_id() -> None:
    agent = Agent(llm=FakeChatModel(["ok"]), checkpointer=InMemorySaver())

    with pytest.raises(UserError, match=r"Agent\.invoke: `config` must be a LangChain RunnableConfig") as caught:
        agent.invoke("hi", "t-1")  # type: ignore[arg-type]  # the second positional is the config
    assert "pass `thread_id='t-1'`" in str(caught.value)  # not "needs a thread_id": one was given, in the wrong place
    with pytest.raises(UserError, match=r"Agent\.stream: `config` must be"):
        list(agent.stream("hi", ["t-1"]))  # type: ignore[arg-type]
    assert agent.get_state("t-1").values == {}  # nothing ran


async def test_an_async_thread_id_conflict_is_refused_too() -> None:
    agent = Agent(llm=FakeChatModel(["ok"]), checkpointer=InMemorySaver())

    with pytest.raises(UserError, match="name different threads"):
        await agent.ainvoke("hi", {"configurable": {"thread_id": "b"}}, thread_id="a")
    with pytest.raises(UserError, match="name different threads"):
        [c async for c in agent.astream("hi", {"configurable": {"thread_id": "b"}}, thread_id="a")]


async def test_a_sync_run_inside_a_running_loop_warns_once_naming_the_async_twin() -> None:
    agent = Agent(llm=FakeChatModel(["ok"] * 10))

    with pytest.warns(RuntimeWarning, match=r"Agent\.invoke\(\).*running event loop.*await Agent\.ainvoke") as seen:
        assert agent.invoke("hi") == "ok"
    assert len(seen) == 1
    assert seen[0].filename == __file__  # points at the caller's line
    with pytest.warns(RuntimeWarning, match=r"Agent\.stream\(\).*Agent\.astream") as seen:
        assert list(agent.stream("hi")) == ["ok"]
    assert len(seen) == 1
    with pytest.warns(RuntimeWarning, match=r"Agent\.batch\(\).*Agent\.abatch") as seen:
        assert agent.batch(["a", "b", "c"]) == ["ok"] * 3
    assert len(seen) == 1
    with pytest.warns(RuntimeWarning, match=r"Agent\.batch\(\)") as seen:
        assert agent.batch(["single"]) == ["ok"]  # one input runs on this thread: still one warning
    assert len(seen) == 1
    with pytest.warns(RuntimeWarning, match=r"Agent\.invoke\(\)") as seen:  # through a pipe too
        assert (PROMPT | agent).invoke({"lang": "en", "question": "q"}) == "ok"
    assert len(seen) == 1


async def test_a_sync_call_through_retry_or_fallbacks_warns_once_for_all_its_attempts() -> None:
    calls = {"n": 0}
    flaky = _fails_twice(calls)

    retrying = Agent(llm=FunctionChatModel(flaky)).with_retry(
        retry_if_exception_type=(ConnectionError,), stop_after_attempt=3, wait_exponential_jitter=False
    )
    with pytest.warns(RuntimeWarning, match=r"Agent\.invoke\(\).*await Agent\.ainvoke") as seen:
        assert retrying.invoke("hi") == "finally"  # three attempts, one call
    assert calls["n"] == 3
    assert len(seen) == 1
    both = Agent(llm=FunctionChatModel(_broken)).with_fallbacks([Agent(llm=FakeChatModel(["from the backup"] * 2))])
    with pytest.warns(RuntimeWarning, match=r"Agent\.invoke\(\)") as seen:
        assert both.invoke("hi") == "from the backup"  # two agents tried, one call
    assert len(seen) == 1
    with pytest.warns(RuntimeWarning, match=r"Agent\.invoke\(\)") as seen:
        assert both.invoke("hi") == "from the backup"  # the next call warns again
    assert len(seen) == 1


async def test_sync_runs_off_the_loop_and_async_runs_do_not_warn() -> None:
    agent = Agent(llm=FakeChatModel(["ok"] * 5))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert await asyncio.to_thread(agent.invoke, "hi") == "ok"  # a worker thread runs no loop
        chunks = agent.stream("hi")  # made on the loop, run in a worker thread (as StreamResponse does)
        assert await asyncio.to_thread(list, chunks) == ["ok"]
        assert await agent.ainvoke("hi") == "ok"
        assert [c async for c in agent.astream("hi")] == ["ok"]
        assert await agent.abatch(["x"]) == ["ok"]


def test_deep_agent_is_a_runnable_too() -> None:
    model = echo_model()
    deep = DeepAgent(llm=model, checkpointer=False, name="deep")

    assert isinstance(deep, Runnable) and deep.get_name() == "deep"
    assert (PROMPT | deep | StrOutputParser()).invoke({"lang": "en", "question": "plan it"}) == "PLAN IT"
    assert deep.batch(["a", "b"]) == ["A", "B"]


async def test_deep_agent_astream_events_show_the_model_call() -> None:
    deep = DeepAgent(llm=echo_model(), checkpointer=False)

    events = [e async for e in deep.astream_events("hi", version="v2")]

    assert events[0]["name"] == "DeepAgent"
    assert any(e["event"] == "on_chat_model_start" for e in events)


def test_the_callback_run_id_of_a_config_is_the_agents_run() -> None:
    seen: list[UUID] = []

    class Roots(BaseCallbackHandler):
        def on_chain_start(
            self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: Any = None, **kw: Any
        ) -> None:
            if parent_run_id is None:
                seen.append(run_id)

    run_id = UUID("00000000-0000-4000-8000-000000000042")
    Agent(llm=echo_model()).invoke("hi", {"callbacks": [Roots()], "run_id": run_id})

    assert seen == [run_id]
