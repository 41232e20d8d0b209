"""`Agent(output=M)` / `DeepAgent(output=M)`: a final answer is validated, retried with the error, then refused.

Before: a model that never filled the schema made 200 model calls and raised LangGraph's recursion error
(Agent without tools), or the raw text came back (`max_iterations=3`, DeepAgent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

from ai_utils import Agent, DeepAgent, ModelOutputError, sqlite_saver
from ai_utils.testing import FunctionChatModel


class Answer(BaseModel):
    city: str
    population: int


def scripted(replies: list[str]) -> tuple[FunctionChatModel, list[list[BaseMessage]]]:
    seen: list[list[BaseMessage]] = []

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        seen.append(list(messages))
        return replies[min(len(seen), len(replies)) - 1]

    return FunctionChatModel(reply), seen


def always_bad() -> tuple[FunctionChatModel, list[list[BaseMessage]]]:
    return scripted(["not json {"])


@pytest.mark.parametrize("kwargs", [{}, {"max_iterations": 3}, {"tools": []}])
def test_agent_that_never_fills_the_schema_raises_model_output_error(kwargs: dict[str, Any]) -> None:
    llm, seen = always_bad()
    agent = Agent(llm=llm, output=Answer, **kwargs)  # retries=2 by default, as Chain
    with pytest.raises(ModelOutputError) as caught:
        agent.invoke("Largest city?")
    assert len(seen) == 3  # the first call plus `retries` retries, not 200
    assert caught.value.attempts == 3
    assert "Invalid JSON" in caught.value.errors
    assert caught.value.output == "not json {"
    assert "recursion_limit" not in str(caught.value)


def test_deep_agent_that_never_fills_the_schema_raises(tmp_path: Path) -> None:
    llm, seen = always_bad()
    with sqlite_saver(tmp_path / "t.sqlite") as saver:
        agent = DeepAgent(llm=llm, output=Answer, checkpointer=saver, retries=1)
        with pytest.raises(ModelOutputError):
            agent.invoke("Largest city?", thread_id="t")
    assert len(seen) == 2


def test_the_validation_error_is_fed_back_and_the_retry_wins(tmp_path: Path) -> None:
    good = '{"city": "Berlin", "population": 3900000}'
    llm, seen = scripted(['{"city": "Berlin", "population": "many"}', good])
    with sqlite_saver(tmp_path / "t.sqlite") as saver:
        agent = Agent(llm=llm, output=Answer, checkpointer=saver)
        result = agent.invoke("Largest city?", thread_id="t")
        assert result == Answer(city="Berlin", population=3900000)
        retry_prompt = seen[1][-1]
        assert isinstance(retry_prompt, HumanMessage) and "population" in retry_prompt.text
        # the rejected attempt lives only inside the model step; the thread keeps the accepted answer
        messages = agent.get_state("t").values["messages"]
        assert [type(m) for m in messages] == [HumanMessage, AIMessage]
        assert messages[-1].text == good
        # the next turn works on the same thread
        llm2, _ = scripted(['{"city": "Hamburg", "population": 1900000}'])
        again = Agent(llm=llm2, output=Answer, checkpointer=saver).invoke("Second?", thread_id="t")
        assert again == Answer(city="Hamburg", population=1900000)


async def test_deep_agent_async_retry_then_valid() -> None:
    llm, seen = scripted(["Berlin, about 3.9 million", '{"city": "Berlin", "population": 3900000}'])
    agent = DeepAgent(llm=llm, output=Answer)
    result = await agent.ainvoke("Largest city?", thread_id="a")
    assert result == Answer(city="Berlin", population=3900000)
    assert len(seen) == 2


def test_a_run_stopped_before_any_answer_never_returns_text() -> None:
    def lookup(city: str) -> str:
        """Look a city up."""
        return "3.9 million"

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        return {"content": "Let me look.", "tool_calls": [{"name": "lookup", "args": {"city": "Berlin"}}]}

    agent = Agent(llm=FunctionChatModel(reply), output=Answer, tools=[lookup], should_break_early=lambda i: True)
    with pytest.raises(ModelOutputError, match="without a structured answer"):
        agent.invoke("Largest city?")


def test_tool_strategy_bad_arguments_are_retried_and_bounded() -> None:
    """A model without native structured output calls the schema tool; bad arguments are retried too."""
    calls: list[int] = []

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        calls.append(1)
        name = tools[-1]["function"]["name"] if tools else "Answer"
        return {"tool_calls": [{"name": name, "args": {"city": "Berlin", "population": "lots"}}]}

    agent = Agent(llm=FunctionChatModel(reply), output=Answer, retries=1)
    with pytest.raises(ModelOutputError):
        agent.invoke("Largest city?")
    assert len(calls) == 2
