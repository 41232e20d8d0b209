"""The fakes inside real LangChain/LangGraph agents: tool loops, messages streaming, callbacks."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import LLMResult
from langchain_core.tools import tool
from pydantic import BaseModel

from ai_utils.testing import FakeChatModel, FunctionChatModel


@tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"Sunny in {city}"


def _script() -> list[Any]:
    return [
        {"reasoning": "I should look it up.", "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]},
        "It is sunny in Paris.",
    ]


def test_create_agent_invoke_calls_the_tool_and_finishes() -> None:
    model = FakeChatModel(_script())
    agent = create_agent(model=model, tools=[get_weather])

    result = agent.invoke({"messages": [("user", "Weather in Paris?")]})

    messages = result["messages"]
    assert [type(m).__name__ for m in messages] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert messages[2].content == "Sunny in Paris"
    assert messages[2].tool_call_id == messages[1].tool_calls[0]["id"]
    assert messages[2].tool_call_id.startswith("call_1_0_")
    assert messages[-1].content == "It is sunny in Paris."
    assert isinstance(model.calls[1][-1], ToolMessage)


def test_create_agent_streams_messages_including_tool_call_chunks() -> None:
    model = FakeChatModel(_script())
    agent = create_agent(model=model, tools=[get_weather])

    events = list(agent.stream({"messages": [("user", "Weather in Paris?")]}, stream_mode="messages"))

    model_chunks = [m for m, meta in events if meta["langgraph_node"] == "model"]
    tool_messages = [m for m, meta in events if meta["langgraph_node"] == "tools"]
    assert all(isinstance(m, AIMessageChunk) for m in model_chunks)
    assert any(m.tool_call_chunks for m in model_chunks)
    assert any(b["type"] == "reasoning" for m in model_chunks for b in m.content_blocks)
    assert "".join(m.text for m in model_chunks) == "It is sunny in Paris."
    assert [m.content for m in tool_messages] == ["Sunny in Paris"]


async def test_create_agent_astream_messages_calls_the_tool_and_finishes() -> None:
    model = FakeChatModel(_script())
    agent = create_agent(model=model, tools=[get_weather])

    events = [e async for e in agent.astream({"messages": [("user", "Weather?")]}, stream_mode="messages")]
    result = await create_agent(model=FakeChatModel(_script()), tools=[get_weather]).ainvoke(
        {"messages": [("user", "Weather?")]}
    )

    assert "".join(m.text for m, meta in events if meta["langgraph_node"] == "model") == "It is sunny in Paris."
    assert any(isinstance(m, ToolMessage) for m, _ in events)
    assert result["messages"][-1].content == "It is sunny in Paris."


def test_function_model_drives_an_agent_from_the_conversation() -> None:
    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return f"The tool said: {last.content}"
        return {"tool_calls": [{"name": tools[0]["function"]["name"], "args": {"city": "Rome"}}]}

    agent = create_agent(model=FunctionChatModel(reply), tools=[get_weather])

    result = agent.invoke({"messages": [("user", "Weather in Rome?")]})

    assert result["messages"][-1].content == "The tool said: Sunny in Rome"


class _UsageRecorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.usage: list[Any] = []

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        message = response.generations[0][0].message  # type: ignore[attr-defined]
        assert isinstance(message, AIMessage)
        self.usage.append(message.usage_metadata)


def test_callbacks_see_usage_for_invoke_and_stream() -> None:
    recorder = _UsageRecorder()
    model = FakeChatModel(["one two", "one two"])

    model.invoke("hi there", config={"callbacks": [recorder]})
    list(model.stream("hi there", config={"callbacks": [recorder]}))

    expected = {"input_tokens": 2, "output_tokens": 2, "total_tokens": 4}
    assert recorder.usage == [expected, expected]


class Forecast(BaseModel):
    city: str
    celsius: int


def test_create_agent_response_format_takes_a_scripted_tool_call_named_after_the_schema() -> None:
    model = FakeChatModel([{"tool_calls": [{"name": "Forecast", "args": {"city": "Oslo", "celsius": -2}}]}])
    agent = create_agent(model=model, tools=[], response_format=Forecast)

    result = agent.invoke({"messages": [("user", "Forecast for Oslo?")]})

    assert result["structured_response"] == Forecast(city="Oslo", celsius=-2)
