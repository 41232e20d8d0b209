from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from _services import free_port
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

import ai_utils.tools.mcp as mcp_module
from ai_utils._utils import run_sync
from ai_utils.exceptions import AiUtilsError, UserError
from ai_utils.testing import FakeChatModel
from ai_utils.tools.mcp import MCPConnectionError, MCPServer, mcp_scope

COUNTER_SERVER = Path(__file__).parent / "mcp_servers" / "counter_server.py"


def _by_name(tools: list[BaseTool]) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in tools}


def _text(result: Any) -> str:
    """The text of an MCP tool result (LangChain returns it as content blocks)."""
    if isinstance(result, ToolMessage):
        result = result.content
    if isinstance(result, str):
        return result
    return "".join(block["text"] for block in result if block.get("type") == "text")


def _closed_sessions(counter_url: str) -> list[str]:
    closed: list[str] = httpx.get(counter_url.removesuffix("/mcp") + "/_closed", timeout=5).json()
    return closed


async def _whoami(tools: dict[str, BaseTool]) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(_text(await tools["counter__whoami"].ainvoke({})))
    return report


def _counter_stdio(pidfile: Path) -> MCPServer:
    return MCPServer("counter", command=sys.executable, args=[str(COUNTER_SERVER), "stdio", str(pidfile)])


def _pids(pidfile: Path) -> list[int]:
    return [int(line) for line in pidfile.read_text().split()] if pidfile.exists() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _until(condition: Any) -> None:
    with anyio.fail_after(10):
        while not condition():
            await anyio.sleep(0.05)


async def test_everything_echo_is_callable_as_prefixed_tool_over_streamable_http(everything_url: str) -> None:
    with anyio.fail_after(15):
        async with mcp_scope(MCPServer("everything", everything_url)) as scope:
            tools = _by_name(scope.tools)
            assert "everything__echo" in tools
            assert tools["everything__echo"].description
            assert _text(await tools["everything__echo"].ainvoke({"message": "hallo"})) == "Echo: hallo"


async def test_everything_echo_is_callable_over_stdio(everything_js: Path) -> None:
    server = MCPServer("everything", command="node", args=[str(everything_js), "stdio"])
    with anyio.fail_after(15):
        async with mcp_scope(server) as scope:
            echo = _by_name(scope.tools)["everything__echo"]
            assert _text(await echo.ainvoke({"message": "über stdio"})) == "Echo: über stdio"


async def test_tool_calls_in_one_scope_share_one_session_and_a_new_scope_gets_a_new_one(counter_url: str) -> None:
    server = MCPServer("counter", counter_url)
    with anyio.fail_after(15):
        async with mcp_scope(server) as scope:
            tools = _by_name(scope.tools)
            assert _text(await tools["counter__increment"].ainvoke({})) == "1"
            assert _text(await tools["counter__increment"].ainvoke({})) == "2"
            first = (await _whoami(tools))["session_id"]
            assert (await _whoami(tools))["session_id"] == first
        async with mcp_scope(server) as scope:
            tools = _by_name(scope.tools)
            assert _text(await tools["counter__increment"].ainvoke({})) == "1"
            assert (await _whoami(tools))["session_id"] != first


async def test_scope_end_closes_the_http_session_on_the_server(counter_url: str) -> None:
    with anyio.fail_after(15):
        async with mcp_scope(MCPServer("counter", counter_url)) as scope:
            session_id = (await _whoami(_by_name(scope.tools)))["session_id"]
            assert session_id not in _closed_sessions(counter_url)
        assert session_id in _closed_sessions(counter_url)


async def test_exception_in_the_body_propagates_unwrapped_and_closes_the_session(counter_url: str) -> None:
    session_id = None
    with anyio.fail_after(15), pytest.raises(KeyError, match="from the body"):
        async with mcp_scope(MCPServer("counter", counter_url)) as scope:
            session_id = (await _whoami(_by_name(scope.tools)))["session_id"]
            raise KeyError("from the body")
    assert session_id in _closed_sessions(counter_url)


async def test_cancelling_the_body_closes_the_http_session(counter_url: str) -> None:
    session_id = None
    with anyio.fail_after(15):
        with anyio.CancelScope() as run:
            async with mcp_scope(MCPServer("counter", counter_url)) as scope:
                session_id = (await _whoami(_by_name(scope.tools)))["session_id"]
                run.cancel()
                await anyio.sleep_forever()
        assert run.cancelled_caught
        await _until(lambda: session_id in _closed_sessions(counter_url))


async def test_stdio_server_is_spawned_once_per_scope_with_env_and_cwd_and_exits_when_the_scope_ends(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "pids"
    server = MCPServer(
        "counter",
        command=sys.executable,
        args=[str(COUNTER_SERVER), "stdio", str(pidfile)],
        env={"COUNTER_GREETING": "moin"},
        cwd=tmp_path,
    )
    with anyio.fail_after(20):
        async with mcp_scope(server) as scope:
            tools = _by_name(scope.tools)
            for expected in ("1", "2", "3"):
                assert _text(await tools["counter__increment"].ainvoke({})) == expected
            report = await _whoami(tools)
            assert len(_pids(pidfile)) == 1
            assert report["pid"] == _pids(pidfile)[0]
            assert (report["greeting"], report["cwd"]) == ("moin", str(tmp_path))
            assert _alive(report["pid"])
        assert not _alive(report["pid"])


async def test_stdio_server_exits_when_the_body_raises(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    with anyio.fail_after(20), pytest.raises(RuntimeError, match="model failed"):
        async with mcp_scope(_counter_stdio(pidfile)):
            raise RuntimeError("model failed")
    assert len(_pids(pidfile)) == 1
    assert not _alive(_pids(pidfile)[0])


async def test_stdio_server_exits_when_the_body_is_cancelled(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    with anyio.fail_after(20):
        with anyio.CancelScope() as run:
            async with mcp_scope(_counter_stdio(pidfile)) as scope:
                pid = (await _whoami(_by_name(scope.tools)))["pid"]
                run.cancel()
                await anyio.sleep_forever()
        assert run.cancelled_caught
        await _until(lambda: not _alive(pid))
    assert _pids(pidfile) == [pid]


async def test_a_tool_failing_on_the_server_returns_an_error_tool_message(counter_url: str) -> None:
    with anyio.fail_after(15):
        async with mcp_scope(MCPServer("counter", counter_url)) as scope:
            fail = _by_name(scope.tools)["counter__fail"]
            message = await fail.ainvoke(
                {"type": "tool_call", "id": "c1", "name": fail.name, "args": {"message": "kaputt"}}
            )
            assert isinstance(message, ToolMessage)
            assert message.status == "error"
            assert message.tool_call_id == "c1"
            assert "kaputt" in _text(message)


async def test_tools_of_several_servers_are_prefixed_and_keep_their_unprefixed_name(
    everything_url: str, counter_url: str
) -> None:
    servers = [MCPServer("everything", everything_url), MCPServer("counter", counter_url, description="Zählt.")]
    with anyio.fail_after(15):
        async with mcp_scope(servers) as scope:
            names = [tool.name for tool in scope.tools]
            assert {"everything__echo", "counter__increment", "counter__fail"} <= set(names)
            assert names.index("everything__echo") < names.index("counter__increment")
            increment = _by_name(scope.tools)["counter__increment"]
            assert increment.metadata is not None
            assert (increment.metadata["mcp_server"], increment.metadata["mcp_tool"]) == ("counter", "increment")
            assert [tool.name for tool in scope.tools_by_server["counter"]] == [
                "counter__increment",
                "counter__whoami",
                "counter__fail",
            ]
            assert scope.system_prompt_addition == "MCP server `counter` (tools `counter__*`): Zählt."


async def test_unreachable_url_raises_a_connection_error_naming_the_server() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with anyio.fail_after(15), pytest.raises(MCPConnectionError) as caught:
        async with mcp_scope(MCPServer("crm", url, headers={"Authorization": "Bearer s3cret"})):
            pytest.fail("the body must not run")
    assert caught.value.server == "crm"
    assert "'crm'" in str(caught.value) and url in str(caught.value)
    assert "s3cret" not in str(caught.value)
    assert isinstance(caught.value, AiUtilsError)


async def test_missing_stdio_command_raises_a_connection_error_naming_the_command() -> None:
    with anyio.fail_after(15), pytest.raises(MCPConnectionError, match="'tools'.*no-such-mcp-server-xyz --flag"):
        async with mcp_scope(MCPServer("tools", command="no-such-mcp-server-xyz", args=["--flag"])):
            pytest.fail("the body must not run")


async def test_a_failing_server_closes_the_sessions_already_opened(counter_url: str) -> None:
    before = set(_closed_sessions(counter_url))
    servers = [MCPServer("counter", counter_url), MCPServer("down", f"http://127.0.0.1:{free_port()}/mcp")]
    with anyio.fail_after(15), pytest.raises(MCPConnectionError) as caught:
        async with mcp_scope(servers):
            pytest.fail("the body must not run")
    assert caught.value.server == "down"
    await _until(lambda: len(set(_closed_sessions(counter_url)) - before) == 1)


async def test_no_servers_gives_an_empty_scope() -> None:
    async with mcp_scope(None) as scope:
        assert scope.tools == []
        assert scope.system_prompt_addition == ""


async def test_invalid_servers_raise_user_error_before_connecting() -> None:
    with pytest.raises(UserError, match="Two MCP servers are named 'crm'"):
        async with mcp_scope([MCPServer("crm", "http://a/mcp"), {"name": "crm", "url": "http://b/mcp"}]):
            pytest.fail("the body must not run")


class _TenantAuth(httpx.Auth):
    def auth_flow(self, request: httpx.Request) -> Any:
        request.headers["X-Tenant"] = "t-42"
        yield request


async def test_headers_and_auth_reach_the_http_server(counter_url: str) -> None:
    server = MCPServer("counter", counter_url, headers={"Authorization": "Bearer tok"}, auth=_TenantAuth())
    with anyio.fail_after(15):
        async with mcp_scope(server) as scope:
            report = await _whoami(_by_name(scope.tools))
    assert (report["authorization"], report["tenant"]) == ("Bearer tok", "t-42")


async def test_a_server_that_dies_mid_run_makes_its_tool_call_raise_a_connection_error(tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with mcp_scope(_counter_stdio(tmp_path / "pids")) as scope:
            tools = _by_name(scope.tools)
            os.kill((await _whoami(tools))["pid"], signal.SIGKILL)
            with pytest.raises(MCPConnectionError, match="lost while calling its tool 'increment'") as caught:
                await tools["counter__increment"].ainvoke({})
            assert caught.value.server == "counter"


async def test_a_server_that_never_answers_times_out_with_a_connection_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mcp_module, "CONNECT_TIMEOUT", 0.3)
    with socket.socket() as silent:  # accepts TCP connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        with anyio.fail_after(10), pytest.raises(MCPConnectionError, match="no answer within 0.3 s"):
            async with mcp_scope(MCPServer("slow", url)):
                pytest.fail("the body must not run")


async def test_a_tool_used_after_its_scope_ended_raises_a_connection_error(everything_url: str) -> None:
    with anyio.fail_after(15):
        async with mcp_scope(MCPServer("everything", everything_url)) as scope:
            echo = _by_name(scope.tools)["everything__echo"]
        with pytest.raises(MCPConnectionError, match="only inside their `mcp_scope` block"):
            await echo.ainvoke({"message": "too late"})


def test_scope_runs_from_sync_code_through_run_sync(everything_url: str) -> None:
    async def echo_once() -> str:
        async with mcp_scope(MCPServer("everything", everything_url)) as scope:
            return _text(await _by_name(scope.tools)["everything__echo"].ainvoke({"message": "sync"}))

    assert run_sync(echo_once) == "Echo: sync"


async def test_mcp_tools_keep_one_session_across_the_turns_of_an_agent_run(counter_url: str) -> None:
    model = FakeChatModel(
        [
            {"tool_calls": [{"name": "counter__increment", "args": {}}]},
            {
                "tool_calls": [
                    {"name": "counter__increment", "args": {}},
                    {"name": "counter__fail", "args": {"message": "kaputt"}},
                ]
            },
            "fertig",
        ]
    )
    with anyio.fail_after(15):
        async with mcp_scope(MCPServer("counter", counter_url)) as scope:
            agent = create_agent(model=model, tools=scope.tools)
            result = await agent.ainvoke({"messages": [("user", "zähl zweimal")]})
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [(_text(m), m.status) for m in tool_messages] == [
        ("1", "success"),
        ("2", "success"),
        ("Error executing tool fail: kaputt", "error"),
    ]
    assert result["messages"][-1].content == "fertig"


async def test_scope_of_an_abandoned_generator_closed_from_another_task_closes_the_session(counter_url: str) -> None:
    async def chunks() -> AsyncIterator[str]:
        async with mcp_scope(MCPServer("counter", counter_url)) as scope:
            yield (await _whoami(_by_name(scope.tools)))["session_id"]
            yield "never reached"

    with anyio.fail_after(15):
        stream = chunks()
        session_id = await anext(stream)
        await asyncio.create_task(stream.aclose())
    assert session_id in _closed_sessions(counter_url)


async def test_one_graph_of_routed_tools_serves_runs_of_several_scopes_each_on_its_own_session(
    counter_url: str,
) -> None:
    inc = {"tool_calls": [{"name": "counter__increment", "args": {}}]}
    llm = FakeChatModel([inc, inc, "zwei", inc, "eins"])
    server = MCPServer("counter", counter_url)
    async with mcp_scope(server) as scope:
        graph = create_agent(llm, scope.routed_tools())
        signature = scope.signature
        await graph.ainvoke({"messages": [("user", "zähle")]}, scope.bind({}))
    async with mcp_scope(server) as scope:
        assert scope.signature == signature
        await graph.ainvoke({"messages": [("user", "nochmal")]}, scope.bind({"recursion_limit": 10}))
    results = [[_text(m) for m in llm.calls[i] if isinstance(m, ToolMessage)] for i in (2, 4)]
    assert results == [["1", "2"], ["1"]]  # the second scope's session counts from 1 again


async def test_a_routed_tool_never_connects_on_its_own(counter_url: str) -> None:
    async with mcp_scope(MCPServer("counter", counter_url)) as scope:
        routed = _by_name(scope.routed_tools())
        assert set(routed) == set(_by_name(scope.tools))
        with pytest.raises(MCPConnectionError, match="outside a run") as caught:
            await routed["counter__increment"].ainvoke({})
    assert caught.value.server == "counter"


async def test_a_cancel_that_lands_while_the_sessions_close_waits_for_them_then_cancels(counter_url: str) -> None:
    before = set(_closed_sessions(counter_url))
    entered = asyncio.Event()

    async def run() -> None:
        async with mcp_scope(MCPServer("counter", counter_url)):
            entered.set()  # leaves the block at once: the scope starts closing its session

    task = asyncio.create_task(run())
    await entered.wait()
    task.cancel()  # lands while the scope waits for the session to close
    with pytest.raises(asyncio.CancelledError):
        await task
    # The session was closed (the server saw the DELETE) before the cancellation went on.
    assert len(set(_closed_sessions(counter_url)) - before) == 1
