"""The tool-loop hooks (seed agent-core-toolloop) as Agent options."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from ai_utils import Agent, UserError
from ai_utils.testing import FakeChatModel, FunctionChatModel

calls: list[tuple[str, str]] = []


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    calls.append(("lookup", term))
    return f"found {term}"


@tool
def drop_table(name: str) -> str:
    """Drop a table."""
    calls.append(("drop_table", name))
    return "dropped"


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()


def call(tool_name: str, /, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool_name, "args": args}]}


def test_before_tool_call_can_change_args() -> None:
    agent = Agent(
        llm=FakeChatModel([call("lookup", term="kat"), "ok"]),
        tools=[lookup],
        before_tool_call=lambda name, args: {**args, "term": args["term"].replace("kat", "cat")},
    )
    agent.invoke("x")
    assert calls == [("lookup", "cat")]


def test_before_tool_call_false_blocks_and_the_model_is_told() -> None:
    llm = FakeChatModel([call("drop_table", name="users"), "I may not do that."])
    agent = Agent(
        llm=llm,
        tools=[lookup, drop_table],
        before_tool_call=lambda name, args: False if name == "drop_table" else None,
    )
    assert agent.invoke("drop users") == "I may not do that."
    assert calls == []
    result = [m for m in llm.calls[1] if isinstance(m, ToolMessage)][0]
    assert result.status == "error" and "blocked" in str(result.content)


def test_after_tool_call_sees_every_result() -> None:
    seen: list[tuple[str, Any]] = []
    agent = Agent(
        llm=FakeChatModel([call("lookup", term="a"), call("lookup", term="b"), "done"]),
        tools=[lookup],
        after_tool_call=lambda name, result: seen.append((name, result)),
    )
    agent.invoke("x")
    assert seen == [("lookup", "found a"), ("lookup", "found b")]


async def test_async_hooks_run_in_async_runs() -> None:
    seen: list[str] = []

    async def before(name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"term": args["term"].upper()}

    async def after(name: str, result: Any) -> None:
        seen.append(str(result))

    agent = Agent(
        llm=FakeChatModel([call("lookup", term="x"), "ok"]),
        tools=[lookup],
        before_tool_call=before,
        after_tool_call=after,
    )
    assert await agent.ainvoke("x") == "ok"
    assert calls == [("lookup", "X")] and seen == ["found X"]


def test_async_hook_in_a_sync_run_is_a_clear_error() -> None:
    async def before(name: str, args: dict[str, Any]) -> None:
        return None

    agent = Agent(llm=FakeChatModel([call("lookup", term="x"), "ok"]), tools=[lookup], before_tool_call=before)
    with pytest.raises(UserError, match="ainvoke"):
        agent.invoke("x")


def test_bad_before_tool_call_return_is_a_clear_error() -> None:
    agent = Agent(
        llm=FakeChatModel([call("lookup", term="x"), "ok"]), tools=[lookup], before_tool_call=lambda n, a: "yes"
    )
    with pytest.raises(UserError, match="before_tool_call returned 'yes'"):
        agent.invoke("x")


def test_should_break_early_stops_before_the_next_model_call() -> None:
    asked: list[int] = []

    def stop(iteration: int) -> bool:
        asked.append(iteration)
        return iteration >= 2

    llm = FakeChatModel([call("lookup", term="a"), call("lookup", term="b"), call("lookup", term="c"), "never"])
    Agent(llm=llm, tools=[lookup], should_break_early=stop).invoke("x")
    assert len(llm.calls) == 2 and calls == [("lookup", "a"), ("lookup", "b")]
    assert asked == [1, 2]


def test_max_iterations_bounds_model_calls_and_asks_for_an_answer_last() -> None:
    choices: list[Any] = []

    def model(messages: list[Any], tools: list[Any]) -> Any:
        return call("lookup", term=str(len(messages)))

    class Recording(FunctionChatModel):
        def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kw: Any) -> Any:
            choices.append(tool_choice)
            return super().bind_tools(tools, tool_choice=tool_choice, **kw)

    llm = Recording(model)
    Agent(llm=llm, tools=[lookup], max_iterations=3).invoke("loop forever")
    assert len(calls) <= 3
    assert choices[-1] == "none" and all(c != "none" for c in choices[:-1])


def test_on_provider_error_is_told_and_the_error_propagates() -> None:
    seen: list[tuple[str, int]] = []

    def broken(messages: list[Any], tools: list[Any]) -> AIMessage:
        raise ConnectionError("provider down")

    agent = Agent(llm=FunctionChatModel(broken), on_provider_error=lambda e, i: seen.append((str(e), i)))
    with pytest.raises(ConnectionError, match="provider down"):
        agent.invoke("x")
    assert seen == [("provider down", 1)]


def test_max_iterations_must_be_positive() -> None:
    with pytest.raises(UserError, match="max_iterations"):
        Agent(llm=FakeChatModel(["x"]), max_iterations=0)
