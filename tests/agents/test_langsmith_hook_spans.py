"""With LangSmith tracing on, each middleware hook's span covers the work the hook awaits.

Our async hooks are plain methods handing back a coroutine (``ai_utils/_run/hooks.py``), which LangSmith's
``traceable`` traces as sync functions: their spans would end before the model or tool call they await. Traced
here through LangSmith's own client API in process: a `Client` whose ``create_run``/``update_run`` record runs
instead of sending them, set with ``tracing_context``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool
from langsmith import Client
from langsmith.run_helpers import tracing_context

from ai_utils import Agent
from ai_utils.testing import FunctionChatModel


class RecordingClient(Client):
    """A LangSmith client that keeps each run's name, start and end instead of posting them."""

    def __init__(self) -> None:
        super().__init__(api_key="test-key", api_url="http://127.0.0.1:9", auto_batch_tracing=False)
        self.recorded: dict[str, dict[str, Any]] = {}

    def create_run(self, name: str, inputs: dict[str, Any], run_type: str, **kwargs: Any) -> None:
        self.recorded[str(kwargs["id"])] = {
            "name": name,
            "start": kwargs.get("start_time"),
            "end": kwargs.get("end_time"),
        }

    def update_run(self, run_id: Any, **kwargs: Any) -> None:
        if kwargs.get("end_time") is not None:
            self.recorded.setdefault(str(run_id), {})["end"] = kwargs["end_time"]

    def span(self, name: str) -> tuple[datetime, datetime]:
        [run] = [r for r in self.recorded.values() if r.get("name") == name]
        return _time(run["start"]), _time(run["end"])

    def spans(self, suffix: str) -> list[tuple[str, datetime, datetime]]:
        return [
            (r["name"], _time(r["start"]), _time(r["end"]))
            for r in self.recorded.values()
            if str(r.get("name", "")).endswith(suffix)
        ]


MODEL_REPAIR = "ai_utils.ThreadRepair.awrap_model_call"  # the repair step rides on each model call


def _time(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


@tool
async def lookup(query: str) -> str:
    """Look something up (slowly)."""
    await asyncio.sleep(0.15)
    return f"found {query}"


def slow_agent() -> Agent[str]:
    async def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        await asyncio.sleep(0.15)
        if isinstance(messages[-1], ToolMessage):
            return "Done."
        return {"tool_calls": [{"name": "lookup", "args": {"query": "x"}}]}

    # after_tool_call adds the tool-loop hooks (a plain awrap_tool_call); the repair step wraps each model call.
    return Agent(llm=FunctionChatModel(reply), tools=[lookup], after_tool_call=lambda name, result: None)


async def test_the_attack_the_fast_graphs_hook_spans_end_before_the_model_call() -> None:
    client = RecordingClient()
    agent = slow_agent()

    with tracing_context(enabled=True, client=client, project_name="tests"):
        await agent.graph.ainvoke({"messages": [("user", "hi")]})  # the graph untraced runs use

    model_calls = sorted(client.spans("FunctionChatModel"), key=lambda span: span[1])
    hooks = client.spans(".awrap_model_call")
    assert len(model_calls) == 2
    assert {name for name, _, _ in hooks} == {"ai_utils.ToolLoopHooks.awrap_model_call", MODEL_REPAIR}
    last_call_end = model_calls[-1][2]
    assert all(hook_end < last_call_end for _, _, hook_end in hooks)  # every hook "ended" before the work
    tool_hooks = client.spans(".awrap_tool_call")
    assert tool_hooks and all(hook_end < client.span("lookup")[1] for _, _, hook_end in tool_hooks)


async def test_with_tracing_each_hook_span_covers_the_model_and_tool_call_it_awaits() -> None:
    client = RecordingClient()
    agent = slow_agent()

    with tracing_context(enabled=True, client=client, project_name="tests"):
        assert await agent.ainvoke("hi") == "Done."

    model_calls = sorted(client.spans("FunctionChatModel"), key=lambda span: span[1])
    assert len(model_calls) == 2
    for name in ("ai_utils.ToolLoopHooks.awrap_model_call", MODEL_REPAIR):
        hooks = sorted((span for span in client.spans(".awrap_model_call") if span[0] == name), key=lambda s: s[1])
        assert len(hooks) == 2, name
        for (_, hook_start, hook_end), (_, call_start, call_end) in zip(hooks, model_calls, strict=True):
            assert hook_start <= call_start and call_end <= hook_end, name
    tool_start, tool_end = client.span("lookup")
    assert (tool_end - tool_start).total_seconds() >= 0.1
    tool_hooks = client.spans(".awrap_tool_call")  # the tool-loop hooks and the run guards
    assert {name for name, _, _ in tool_hooks} >= {"ai_utils.ToolLoopHooks.awrap_tool_call"}
    assert all(hook_start <= tool_start and tool_end <= hook_end for _, hook_start, hook_end in tool_hooks)


async def test_a_run_after_tracing_ends_is_untraced_and_still_answers() -> None:
    client = RecordingClient()
    agent = slow_agent()

    with tracing_context(enabled=True, client=client, project_name="tests"):
        await agent.ainvoke("hi")
    seen = len(client.recorded)
    assert await agent.ainvoke("again") == "Done."

    assert len(client.recorded) == seen  # nothing more was traced
