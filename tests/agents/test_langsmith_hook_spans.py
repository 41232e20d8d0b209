"""With LangSmith tracing on, each middleware hook's span covers the work the hook awaits.

Our async hooks are plain methods handing back a coroutine (``ai_utils/_run/hooks.py``), which LangSmith's
``traceable`` traces as sync functions: their spans would end before the model or tool call they await. Traced
through LangSmith's own `Client`, pointed at a local fake of its HTTP API (the runs it is sent, ``POST /runs`` and
``PATCH /runs/{id}``, kept in memory), and set with ``tracing_context``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.tracers.langchain import wait_for_all_tracers
from langsmith import Client
from langsmith.run_helpers import tracing_context

from ai_utils import Agent
from ai_utils.testing import FunctionChatModel


class FakeLangSmith(ThreadingHTTPServer):
    """LangSmith's run endpoints on 127.0.0.1: each run's name, start and end, as the client sent them."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _RunsHandler)
        self.recorded: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def client(self) -> Client:
        """LangSmith's client for this server (one request per run start and end, no batching)."""
        return Client(api_key="test-key", api_url=f"http://127.0.0.1:{self.server_port}", auto_batch_tracing=False)

    def span(self, name: str) -> tuple[datetime, datetime]:
        [run] = [r for r in self.recorded.values() if r.get("name") == name]
        return _time(run["start"]), _time(run["end"])

    def spans(self, suffix: str) -> list[tuple[str, datetime, datetime]]:
        return [
            (r["name"], _time(r["start"]), _time(r["end"]))
            for r in self.recorded.values()
            if str(r.get("name", "")).endswith(suffix)
        ]


class _RunsHandler(BaseHTTPRequestHandler):
    server: FakeLangSmith

    def do_POST(self) -> None:
        body = self._body()
        if self.path == "/runs" and isinstance(body, dict):
            with self.server.lock:
                run = self.server.recorded.setdefault(str(body["id"]), {})
                run.update(name=body.get("name"), start=body.get("start_time"))
                if body.get("end_time") is not None:
                    run["end"] = body["end_time"]
        self._reply()

    def do_PATCH(self) -> None:
        body = self._body()
        if self.path.startswith("/runs/") and isinstance(body, dict) and body.get("end_time") is not None:
            with self.server.lock:
                self.server.recorded.setdefault(self.path.removeprefix("/runs/"), {})["end"] = body["end_time"]
        self._reply()

    def do_GET(self) -> None:
        self._reply()

    def _body(self) -> Any:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        return json.loads(raw) if raw else None

    def _reply(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def langsmith() -> Iterator[tuple[FakeLangSmith, Client]]:
    server = FakeLangSmith()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = server.client()
    try:
        yield server, client
    finally:
        wait_for_all_tracers()
        client.session.close()
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


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


async def test_the_fast_graph_run_by_hand_under_tracing_shows_no_hook_spans_that_end_before_their_work(
    langsmith: tuple[FakeLangSmith, Client],
) -> None:
    recorded, client = langsmith
    agent = slow_agent()

    with tracing_context(enabled=True, client=client, project_name="tests"):
        await agent.graph.ainvoke({"messages": [("user", "hi")]})  # the graph untraced runs use
    wait_for_all_tracers()

    # The fast graph's hooks are not wrapped in langsmith's traceable (ai_utils/_compat/langchain.py): its
    # traced twin is what a traced run gets, so the fast graph never reports a hook span that ends too early.
    assert len(recorded.spans("FunctionChatModel")) == 2
    assert recorded.spans(".awrap_model_call") == []
    assert recorded.spans(".awrap_tool_call") == []
    assert recorded.span("lookup")


async def test_with_tracing_each_hook_span_covers_the_model_and_tool_call_it_awaits(
    langsmith: tuple[FakeLangSmith, Client],
) -> None:
    recorded, client = langsmith
    agent = slow_agent()

    with tracing_context(enabled=True, client=client, project_name="tests"):
        assert await agent.ainvoke("hi") == "Done."
    wait_for_all_tracers()

    model_calls = sorted(recorded.spans("FunctionChatModel"), key=lambda span: span[1])
    assert len(model_calls) == 2
    for name in ("ai_utils.ToolLoopHooks.awrap_model_call", MODEL_REPAIR):
        hooks = sorted((span for span in recorded.spans(".awrap_model_call") if span[0] == name), key=lambda s: s[1])
        assert len(hooks) == 2, name
        for (_, hook_start, hook_end), (_, call_start, call_end) in zip(hooks, model_calls, strict=True):
            assert hook_start <= call_start and call_end <= hook_end, name
    tool_start, tool_end = recorded.span("lookup")
    assert (tool_end - tool_start).total_seconds() >= 0.1
    tool_hooks = recorded.spans(".awrap_tool_call")  # the tool-loop hooks and the run guards
    assert {name for name, _, _ in tool_hooks} >= {"ai_utils.ToolLoopHooks.awrap_tool_call"}
    assert all(hook_start <= tool_start and tool_end <= hook_end for _, hook_start, hook_end in tool_hooks)


async def test_a_run_after_tracing_ends_is_untraced_and_still_answers(langsmith: tuple[FakeLangSmith, Client]) -> None:
    recorded, client = langsmith
    agent = slow_agent()

    with tracing_context(enabled=True, client=client, project_name="tests"):
        await agent.ainvoke("hi")
    wait_for_all_tracers()
    seen = len(recorded.recorded)
    assert seen
    assert await agent.ainvoke("again") == "Done."
    wait_for_all_tracers()

    assert len(recorded.recorded) == seen  # nothing more was traced
