"""Pooled MCP sessions (`MCPServer.session`): reused across runs, never shared by concurrent runs, opened again
after the server forgot them, closed with the loop and at process exit. Real FastMCP servers over HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _services import free_port, running
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from ai_utils import Agent
from ai_utils._loop_resources import aclose_loop_resources
from ai_utils.exceptions import UserError
from ai_utils.testing import FakeChatModel
from ai_utils.tools.mcp import MCPServer, mcp_scope

COUNTER_SERVER = Path(__file__).parent / "mcp_servers" / "counter_server.py"


def _text(result: Any) -> str:
    if isinstance(result, ToolMessage):
        result = result.content
    if isinstance(result, str):
        return result
    return "".join(block["text"] for block in result if block.get("type") == "text")


def _tools(scope: Any) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in scope.tools}


async def _whoami(scope: Any) -> str | None:
    report: dict[str, Any] = json.loads(_text(await _tools(scope)["counter__whoami"].ainvoke({})))
    return report["session_id"]


async def _increment(scope: Any) -> int:
    return int(_text(await _tools(scope)["counter__increment"].ainvoke({})))


def _report(url: str, path: str) -> Any:
    return httpx.get(url.removesuffix("/mcp") + path, timeout=5).json()


@pytest.fixture(scope="module")
def stateless_url() -> Iterator[str]:
    """Our counter server in FastMCP's stateless mode: it answers `initialize` without an `Mcp-Session-Id`."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with running([sys.executable, str(COUNTER_SERVER), "http-stateless", str(port)], ready_url=url):
        yield url


async def test_a_stateless_server_is_pooled_by_default(stateless_url: str) -> None:
    server = MCPServer("counter", url=stateless_url)
    before = _report(stateless_url, "/_initialized")
    for _ in range(3):
        async with mcp_scope(server) as scope:
            assert await _increment(scope) == 1  # the server keeps nothing between requests
    assert _report(stateless_url, "/_initialized") == before + 1


async def test_a_stateful_server_gets_a_session_per_run_by_default(counter_url: str) -> None:
    server = MCPServer("counter", url=counter_url)
    async with mcp_scope(server) as scope:
        first = await _whoami(scope)
    async with mcp_scope(server) as scope:
        second = await _whoami(scope)
        assert await _increment(scope) == 1
    assert first is not None and second is not None and first != second
    assert first in _report(counter_url, "/_closed")


async def test_per_run_opens_a_session_per_run_even_for_a_stateless_server(stateless_url: str) -> None:
    server = MCPServer("counter", url=stateless_url, session="per_run")
    before = _report(stateless_url, "/_initialized")
    for _ in range(2):
        async with mcp_scope(server):
            pass
    assert _report(stateless_url, "/_initialized") == before + 2


async def test_a_pooled_session_carries_its_state_into_the_next_run_of_an_agent(counter_url: str) -> None:
    inc = {"tool_calls": [{"name": "counter__increment", "args": {}}]}
    llm = FakeChatModel([inc, "eins", inc, "zwei"])
    agent = Agent(llm=llm, mcp_server=MCPServer("counter", counter_url, session="pooled"))

    assert await agent.ainvoke("zähle") == "eins"
    assert await agent.ainvoke("nochmal") == "zwei"
    results = [m.text for call in (1, 3) for m in llm.calls[call] if isinstance(m, ToolMessage)]
    assert results[-1] == "2"  # the second run borrowed the first run's server session


async def test_concurrent_runs_never_share_a_pooled_session(counter_url: str) -> None:
    server = MCPServer("counter", url=counter_url, session="pooled")
    both_open = asyncio.Barrier(2)

    async def run() -> tuple[str | None, list[int]]:
        async with mcp_scope(server) as scope:
            await both_open.wait()
            session_id = await _whoami(scope)
            counts = [await _increment(scope), await _increment(scope)]
            await both_open.wait()  # neither run gives its session back while the other still runs
            return session_id, counts

    (first_id, first_counts), (second_id, second_counts) = await asyncio.gather(run(), run())
    assert first_id != second_id
    assert first_counts == second_counts == [1, 2]
    # Both sessions went back to the pool; the next two concurrent runs borrow them, one each.
    (third_id, third_counts), (fourth_id, fourth_counts) = await asyncio.gather(run(), run())
    assert {third_id, fourth_id} == {first_id, second_id}
    assert third_counts == fourth_counts == [3, 4]


async def test_a_pooled_session_is_initialised_again_after_a_server_restart() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    command = [sys.executable, str(COUNTER_SERVER), "http", str(port)]
    server = MCPServer("counter", url=url, session="pooled")
    with running(command, ready_url=url):
        async with mcp_scope(server) as scope:
            before = await _whoami(scope)
            assert await _increment(scope) == 1
    with running(command, ready_url=url):  # a new process: it answers the old session id with 404
        async with mcp_scope(server) as scope:
            assert await _increment(scope) == 1  # retried on a new session, state starts over
            after = await _whoami(scope)
        async with mcp_scope(server) as scope:
            assert await _whoami(scope) == after  # the new session went back to the pool
            assert await _increment(scope) == 2
        await aclose_loop_resources()
        assert after in _report(url, "/_closed")
    assert before is not None and after is not None and before != after


async def test_the_pool_closes_its_sessions_with_the_loop(counter_url: str) -> None:
    async with mcp_scope(MCPServer("counter", url=counter_url, session="pooled")) as scope:
        session_id = await _whoami(scope)
    assert session_id not in _report(counter_url, "/_closed")  # idle in the pool
    await aclose_loop_resources()
    assert session_id in _report(counter_url, "/_closed")


def test_the_pool_closes_its_sessions_at_process_exit(counter_url: str) -> None:
    script = textwrap.dedent(
        """
        import asyncio, json, sys
        from ai_utils.tools.mcp import MCPServer, mcp_scope

        async def main():
            async with mcp_scope(MCPServer("counter", url=sys.argv[1], session="pooled")) as scope:
                tool = next(t for t in scope.tools if t.name == "counter__whoami")
                result = await tool.ainvoke({})
                text = result if isinstance(result, str) else result[0]["text"]
                print(json.loads(text)["session_id"])

        loop = asyncio.new_event_loop()  # left open: the exit hook closes the pool on it
        loop.run_until_complete(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script, counter_url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    session_id = done.stdout.strip()
    assert session_id and session_id in _report(counter_url, "/_closed")


def test_an_unknown_session_mode_is_refused_with_the_choices() -> None:
    with pytest.raises(UserError, match=r"session='sticky' is unknown; use `session='per_run'`"):
        MCPServer("crm", url="http://127.0.0.1:1/mcp", session="sticky")  # type: ignore[arg-type]
    assert "session='pooled'" in repr(MCPServer("crm", url="http://127.0.0.1:1/mcp", session="pooled"))
