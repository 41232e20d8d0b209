"""DeepAgent runs the same tool loop as `Agent` (SPEC §19): tool errors, writers alone, the run record, traces."""

from __future__ import annotations

import time

import pytest
from langchain_core.messages import ToolMessage

from ai_utils import AgentRun, AgentTraceEvent, DeepAgent, UserError
from ai_utils.client import is_tool_event
from ai_utils.testing import FakeChatModel, FunctionChatModel

KEY = "xoxb-" + "1234567890-abcdefghij"


def deploy(service: str) -> str:
    """Deploy a service."""
    raise PermissionError(f"deploy of {service} refused with token {KEY}")


def _call(name: str, **args: str) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "args": args}]}


def test_a_raising_tool_reaches_the_deep_agents_model_and_the_stream_shows_status_error() -> None:
    llm = FakeChatModel([_call("deploy", service="api"), "Deploy was refused."])
    agent = DeepAgent(llm=llm, tools=[deploy])
    chunks = list(agent.stream("Deploy api", thread_id="t", show_tool_calls=True))
    assert [c["status"] for c in chunks if is_tool_event(c) and c["phase"] == "end"] == ["error"]
    assert "".join(c for c in chunks if isinstance(c, str)) == "Deploy was refused."
    (failed,) = [m for m in llm.calls[1] if isinstance(m, ToolMessage)]
    assert failed.text == "PermissionError: deploy of api refused with token [REDACTED:slack_token]"


def test_deep_agent_tool_errors_raise() -> None:
    agent = DeepAgent(llm=FakeChatModel([_call("deploy", service="api"), "never"]), tools=[deploy], tool_errors="raise")
    with pytest.raises(PermissionError, match="deploy of api refused"):
        agent.invoke("Deploy api", thread_id="t")


async def test_deep_agent_parallel_tools_false_details_and_traces() -> None:
    spans: dict[str, tuple[float, float]] = {}

    def step(key: str) -> str:
        """One step."""
        spans[key] = (time.perf_counter(), time.perf_counter())
        return key

    events: list[AgentTraceEvent] = []
    calls = {"tool_calls": [{"name": "step", "args": {"key": k}} for k in "abc"]}
    agent = DeepAgent(
        llm=FakeChatModel([calls, "done"]), tools=[step], parallel_tools=False, on_trace=events.append, name="ops"
    )
    run = await agent.ainvoke("go", thread_id="t", details=True)
    assert isinstance(run, AgentRun) and run.output == "done" and run.iterations == 2
    assert spans["a"][1] <= spans["b"][0] and spans["b"][1] <= spans["c"][0]
    types = [e.type for e in events]
    assert types[0] == "started" and types[-1] == "completed" and types.count("tool.finished") == 3
    assert {e.trace_id for e in events} == {run.trace_id} and {e.agent for e in events} == {"ops"}


def test_deep_agent_allowed_tools_knows_the_built_in_tools() -> None:
    seen: list[list[str]] = []

    def model(messages: list[object], tools: list[dict[str, dict[str, str]]]) -> str:
        seen.append(sorted(t["function"]["name"] for t in tools))
        return "ok"

    agent = DeepAgent(llm=FunctionChatModel(model), tools=[deploy])
    assert agent.invoke("hi", thread_id="t", allowed_tools=["read_file", "deploy"]) == "ok"
    assert seen == [["deploy", "read_file"]]
    with pytest.raises(UserError, match=r"\['rm_rf'\]"):
        agent.invoke("hi", thread_id="t", allowed_tools=["read_file", "rm_rf"])
