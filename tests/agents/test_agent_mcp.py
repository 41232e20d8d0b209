"""MCP servers through Agent: `<server>__<tool>`, description in the prompt, one session held per run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils import Agent, MCPConnectionError, MCPServer, UserError
from ai_utils.client import is_tool_event
from ai_utils.testing import FakeChatModel, FunctionChatModel
from ai_utils.tools.mcp import clear_tool_cache

COUNTER = Path(__file__).parents[1] / "tools" / "mcp_servers" / "counter_server.py"
TOOLSET = Path(__file__).parents[1] / "tools" / "mcp_servers" / "toolset_server.py"


def closed_sessions(counter_url: str) -> list[str]:
    closed: list[str] = httpx.get(counter_url.removesuffix("/mcp") + "/_closed", timeout=5).json()
    return closed


def tool_results(llm: FakeChatModel, call: int) -> list[str]:
    return [m.text for m in llm.calls[call] if isinstance(m, ToolMessage)]


def echo(**extra: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "everything__echo", "args": {"message": "hallo"}}], **extra}


def test_everything_echo_over_streamable_http_with_the_description_in_the_prompt(everything_url: str) -> None:
    llm = FakeChatModel([echo(), "Echo kam an."])
    server = MCPServer("everything", everything_url, description="Demo-Server mit Echo.")
    agent = Agent(llm=llm, prompt="Sei nett.", mcp_server=server)

    assert agent.invoke("Echo bitte") == "Echo kam an."
    assert tool_results(llm, 1) == ["Echo: hallo"]
    system = llm.calls[0][0]
    assert isinstance(system, SystemMessage)
    assert "Sei nett." in str(system.content) and "Demo-Server mit Echo." in str(system.content)


async def test_everything_echo_over_stdio_with_astream(everything_js: Path) -> None:
    llm = FakeChatModel([echo(), "fertig"])
    agent = Agent(llm=llm, mcp_server=MCPServer("everything", command="node", args=[str(everything_js), "stdio"]))
    chunks = [c async for c in agent.astream("Echo", show_tool_calls=True)]
    ends = [c for c in chunks if is_tool_event(c) and c["phase"] == "end"]
    assert ends and ends[0]["tool_name"] == "everything__echo" and ends[0]["output"] == "Echo: hallo"
    assert "".join(c for c in chunks if isinstance(c, str)) == "fertig"


def test_two_tool_calls_in_one_run_share_one_server_session(counter_url: str) -> None:
    inc = {"tool_calls": [{"name": "counter__increment", "args": {}}]}
    llm = FakeChatModel([inc, inc, "zwei", inc, "eins"])
    agent = Agent(llm=llm, mcp_server=MCPServer("counter", counter_url))

    assert agent.invoke("zähle") == "zwei"
    assert tool_results(llm, 2) == ["1", "2"]
    agent.invoke("nochmal")  # a new run opens a new session: the counter starts over
    assert tool_results(llm, 4) == ["1"]


def test_sync_stream_closes_the_session_when_the_consumer_stops_early(counter_url: str) -> None:
    whoami = {"tool_calls": [{"name": "counter__whoami", "args": {}}]}
    agent = Agent(llm=FakeChatModel([whoami, "a b c d e f"]), mcp_server=MCPServer("counter", counter_url))
    before = set(closed_sessions(counter_url))
    stream = agent.stream("wer?", show_tool_calls=True)
    for chunk in stream:
        if is_tool_event(chunk) and chunk["phase"] == "end":
            break
    stream.close()  # type: ignore[attr-defined]
    assert len(set(closed_sessions(counter_url)) - before) == 1


def test_an_exception_in_a_tool_run_still_closes_the_session(counter_url: str) -> None:
    def explode(name: str, result: Any) -> None:
        raise RuntimeError("after-hook failed")

    whoami = {"tool_calls": [{"name": "counter__whoami", "args": {}}]}
    agent = Agent(
        llm=FakeChatModel([whoami, "x"]), mcp_server=MCPServer("counter", counter_url), after_tool_call=explode
    )
    before = set(closed_sessions(counter_url))
    with pytest.raises(RuntimeError, match="after-hook failed"):
        agent.invoke("wer?")
    assert len(set(closed_sessions(counter_url)) - before) == 1


def test_a_stdio_server_runs_once_per_run_not_per_tool_call(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    inc = {"tool_calls": [{"name": "counter__increment", "args": {}}]}
    server = MCPServer("counter", command=sys.executable, args=[str(COUNTER), "stdio", str(pidfile)])
    Agent(llm=FakeChatModel([inc, inc, inc, "drei"]), mcp_server=server).invoke("zähle")
    assert len(pidfile.read_text().split()) == 1


def test_a_server_that_is_down_is_named_in_the_error() -> None:
    agent = Agent(llm=FakeChatModel(["x"]), mcp_server=MCPServer("crm", "http://127.0.0.1:9/mcp"))
    with pytest.raises(MCPConnectionError, match="crm") as info:
        agent.invoke("hi")
    assert info.value.server == "crm"


def test_a_tool_name_clash_with_an_mcp_tool_is_a_user_error(everything_url: str) -> None:
    from langchain_core.tools import tool

    from ai_utils import UserError

    @tool("everything__echo")
    def fake_echo(message: str) -> str:
        """Pretend to echo."""
        return message

    agent = Agent(llm=FakeChatModel(["x"]), tools=[fake_echo], mcp_server=MCPServer("everything", everything_url))
    with pytest.raises(UserError, match="everything__echo"):
        agent.invoke("hi")


async def test_sync_invoke_with_mcp_inside_a_running_loop_points_to_ainvoke(everything_url: str) -> None:
    from ai_utils import UserError

    agent = Agent(llm=FakeChatModel(["x"]), mcp_server=MCPServer("everything", everything_url))
    with pytest.raises(UserError, match="ainvoke"):
        agent.invoke("hi")


def test_sync_invoke_with_mcp_passes_callbacks_through(everything_url: str) -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    class Count(BaseCallbackHandler):
        def __init__(self) -> None:
            self.model_calls = 0

        def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
            self.model_calls += 1

    counter = Count()
    agent = Agent(llm=FakeChatModel([echo(), "ok"]), mcp_server=MCPServer("everything", everything_url))
    assert agent.invoke("Echo", callbacks=[counter]) == "ok"
    assert counter.model_calls == 2


def test_the_graph_is_built_once_and_each_run_calls_through_its_own_session(counter_url: str) -> None:
    whoami = {"tool_calls": [{"name": "counter__whoami", "args": {}}]}
    llm = FakeChatModel([whoami, "eins", whoami, "zwei"])
    agent = Agent(llm=llm, mcp_server=MCPServer("counter", counter_url))

    agent.invoke("wer?")
    graph = agent.graph
    agent.invoke("und jetzt?")
    assert agent.graph is graph
    first, second = (json.loads(tool_results(llm, call)[0])["session_id"] for call in (1, 3))
    assert first != second
    assert {first, second} <= set(closed_sessions(counter_url))


def test_a_changed_tool_list_rebuilds_the_graph_with_the_new_tools(tmp_path: Path) -> None:
    toolfile = tmp_path / "tools.txt"
    toolfile.write_text("alpha\n")
    offered: list[list[str]] = []

    def reply(messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        names = [t["function"]["name"] for t in tools]
        if isinstance(messages[-1], ToolMessage):
            return messages[-1].text
        offered.append(names)
        return {"tool_calls": [{"name": names[-1], "args": {"text": "hi"}}]}

    server = MCPServer("kit", command=sys.executable, args=[str(TOOLSET), str(toolfile)])
    agent = Agent(llm=FunctionChatModel(reply), mcp_server=server)
    assert agent.invoke("eins") == "alpha: hi"
    graph = agent.graph

    toolfile.write_text("alpha\nbeta\n")
    clear_tool_cache()  # the server reports the same name and version, so only a new listing shows the change
    assert agent.invoke("zwei") == "beta: hi"
    assert agent.graph is not graph
    assert offered == [["kit__alpha"], ["kit__alpha", "kit__beta"]]


async def test_a_graph_tool_called_outside_an_agent_run_raises_instead_of_connecting(counter_url: str) -> None:
    whoami = {"tool_calls": [{"name": "counter__whoami", "args": {}}]}
    agent = Agent(llm=FakeChatModel([whoami, "ok", whoami]), mcp_server=MCPServer("counter", counter_url))
    await agent.ainvoke("wer?")
    with pytest.raises(MCPConnectionError, match="outside a run"):
        await agent.graph.ainvoke({"messages": [("user", "direkt")]})


def test_an_interrupt_on_key_naming_no_mcp_tool_fails_the_first_run(counter_url: str) -> None:
    agent = Agent(
        llm=FakeChatModel(["x"]),
        mcp_server=MCPServer("counter", counter_url),
        checkpointer=InMemorySaver(),
        interrupt_on={"counter__wohami": True},
    )
    with pytest.raises(UserError, match=r"does not have: \['counter__wohami'\].*counter__whoami"):
        agent.invoke("hi", thread_id="t")


def test_the_run_sessions_and_server_headers_never_reach_the_checkpoints(counter_url: str) -> None:
    saver = InMemorySaver()
    inc = {"tool_calls": [{"name": "counter__increment", "args": {}}]}
    server = MCPServer("counter", counter_url, headers={"Authorization": "Bearer s3cret-token"})
    agent = Agent(llm=FakeChatModel([inc, "ok"]), mcp_server=server, checkpointer=saver)
    assert agent.invoke("zähle", thread_id="t") == "ok"
    tuples = list(saver.list({"configurable": {"thread_id": "t"}}))
    assert tuples
    for part in ("checkpoint", "metadata", "config", "pending_writes"):
        stored = repr([getattr(t, part) for t in tuples])
        assert "__ai_utils_mcp_sessions" not in stored, part
        assert "s3cret-token" not in stored, part
