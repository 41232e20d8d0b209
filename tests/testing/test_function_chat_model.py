from __future__ import annotations

from functools import reduce
from operator import add
from typing import Any

import pytest
from dirty_equals import IsStr
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.tools import tool

from ai_utils.exceptions import UserError
from ai_utils.testing import FunctionChatModel


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return term.upper()


def test_fn_sees_the_messages_and_no_tools_when_none_are_bound() -> None:
    seen: list[tuple[list[str], list[dict[str, Any]]]] = []

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        seen.append(([m.text for m in messages], tools))
        return f"echo: {messages[-1].text}"

    model = FunctionChatModel(reply)

    assert model.invoke("hello").content == "echo: hello"
    assert seen == [(["hello"], [])]


def test_fn_sees_bound_tools_as_openai_tool_dicts() -> None:
    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {"tool_calls": [{"name": tools[0]["function"]["name"], "args": {"term": messages[-1].text}}]}

    reply_message = FunctionChatModel(reply).bind_tools([lookup]).invoke("cat")

    assert reply_message.tool_calls == [
        {"name": "lookup", "args": {"term": "cat"}, "id": IsStr(regex=r"call_1_0_[0-9a-f]{8}"), "type": "tool_call"}
    ]


def test_fn_may_return_an_ai_message_and_streams_like_the_fake() -> None:
    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(content="streamed in pieces", additional_kwargs={"reasoning_content": "hm"})

    chunks = list(FunctionChatModel(reply).stream("hi"))
    merged: AIMessageChunk = reduce(add, chunks)

    assert [c.content for c in chunks if c.content] == ["streamed ", "in ", "pieces"]
    assert merged.content_blocks[0] == {"type": "reasoning", "reasoning": "hm"}
    assert merged.usage_metadata is not None


def test_calls_are_recorded_for_function_models_too() -> None:
    model = FunctionChatModel(lambda messages, tools: "ok")
    model.invoke([HumanMessage("a"), HumanMessage("b")])

    assert [[m.text for m in call] for call in model.calls] == [["a", "b"]]


def test_a_bad_reply_from_fn_names_the_call() -> None:
    model = FunctionChatModel(lambda messages, tools: 42)

    with pytest.raises(UserError, match="the reply of fn for call 1 must be a str"):
        model.invoke("hi")


async def test_async_fn_works_with_ainvoke_and_astream() -> None:
    async def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        return f"async {len(messages)}"

    model = FunctionChatModel(reply)

    assert (await model.ainvoke("x")).content == "async 1"
    assert "".join([str(c.content) async for c in model.astream("y")]) == "async 1"


async def test_sync_fn_works_with_ainvoke() -> None:
    assert (await FunctionChatModel(lambda messages, tools: "sync").ainvoke("x")).content == "sync"


def test_async_fn_works_with_invoke_outside_an_event_loop() -> None:
    async def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        return "from async"

    assert FunctionChatModel(reply).invoke("x").content == "from async"


async def test_async_fn_with_sync_invoke_inside_a_loop_asks_for_ainvoke() -> None:
    async def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        return "never"

    with pytest.raises(UserError, match="ainvoke"):
        FunctionChatModel(reply).invoke("x")


def test_function_model_describes_itself() -> None:
    def decide(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        return "x"

    model = FunctionChatModel(decide, model="scripted")

    assert model._llm_type == "function-chat-model"
    assert model._identifying_params["fn"].endswith("decide")
    assert model.invoke("q").response_metadata["model_name"] == "scripted"
