"""MCP per run (performance.md metric 8): `mcp_scope` vs the raw MCP SDK, on server-everything.

- cold (stdio): our scope open + tool load + close vs SDK spawn + initialize + list_tools + close; the
  process-wide tool-list cache is cleared before each of our samples, so both sides list tools.
- warm (streamable HTTP): our whole per-run MCP cost (open a session, tools from the cache, close) vs one
  ``list_tools`` on an already-open session.
- tool call: ``everything__echo`` through our renamed LangChain tool (scope held open) vs ``session.call_tool``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

from _fixtures import PLAIN_PROMPT, TESTS, free_port, scripted_model, start_service
from _harness import Metric, Session
from langchain_core.tools import BaseTool
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from ai_utils import Agent
from ai_utils.tools import mcp as our_mcp
from ai_utils.tools.mcp import MCPServer, mcp_scope

EVERYTHING = TESTS / "services" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
LOOPBACK = TESTS / "services" / "loopback.cjs"
COUNTER = TESTS / "tools" / "mcp_servers" / "counter_server.py"
TOOL_CALLS = 5

_url: list[str] = []


def _http_url() -> str:
    if not _url:
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        start_service(
            ["node", "--require", str(LOOPBACK), str(EVERYTHING), "streamableHttp"],
            ready_url=url,
            env={"PORT": str(port)},
        )
        _url.append(url)
    return _url[0]


def _clear_cache() -> None:
    clear = getattr(our_mcp, "clear_tool_cache", None)
    if clear is not None:
        clear()


class Held:
    """An async context held open across samples in a task of its own (anyio scopes must exit where entered)."""

    def __init__(self, opener: Callable[[], contextlib.AbstractAsyncContextManager[Any]]) -> None:
        self._opener = opener
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[Any] | None = None
        self._release = asyncio.Event()

    async def get(self) -> Any:
        if self._task is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._hold())
        assert self._ready is not None
        return await self._ready

    async def _hold(self) -> None:
        assert self._ready is not None
        async with self._opener() as value:
            self._ready.set_result(value)
            await self._release.wait()

    async def close(self) -> None:
        if self._task is not None:
            self._release.set()
            await self._task


@contextlib.asynccontextmanager
async def _raw_http_session(url: str) -> AsyncIterator[ClientSession]:
    async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def _our_echo(url: str) -> AsyncIterator[BaseTool]:
    async with mcp_scope(MCPServer("everything", url)) as scope:
        yield next(t for t in scope.tools if t.name == "everything__echo")


async def spawns_per_run() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        pidfile = Path(tmp) / "pids"
        server = MCPServer("counter", command=sys.executable, args=[str(COUNTER), "stdio", str(pidfile)])
        async with mcp_scope(server) as scope:
            increment = next(t for t in scope.tools if t.name == "counter__increment")
            for _ in range(TOOL_CALLS):
                await increment.ainvoke({})
        return len(pidfile.read_text().split())


STDIO = MCPServer("everything", command="node", args=[str(EVERYTHING), "stdio"])
STDIO_PARAMS = StdioServerParameters(command="node", args=[str(EVERYTHING), "stdio"])


async def ours_cold() -> None:
    async with mcp_scope(STDIO) as scope:
        assert scope.tools


async def anchor_cold() -> None:
    async with stdio_client(STDIO_PARAMS) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        assert (await session.list_tools()).tools


def _agent_metric(mode: Literal["per_run", "pooled"]) -> Metric:
    agents: dict[str, Agent] = {}

    async def agent_with_mcp() -> None:
        if "mcp" not in agents:
            server = MCPServer("everything", _http_url(), session=mode)
            agents["mcp"] = Agent(llm=scripted_model(), mcp_server=server)
        assert await agents["mcp"].ainvoke(PLAIN_PROMPT)

    async def agent_without() -> None:
        if "plain" not in agents:
            agents["plain"] = Agent(llm=scripted_model())
        assert await agents["plain"].ainvoke(PLAIN_PROMPT)

    def agent_run(session: Session) -> tuple[float, float]:
        m = session.medians({"ours": agent_with_mcp, "anchor": agent_without})
        return m["ours"] * 1e3, m["anchor"] * 1e3

    if mode == "pooled":
        return Metric(
            "Agent.ainvoke with an MCP server (HTTP, session='pooled') / the same Agent without",
            measure=agent_run,
            target=1.5,
            unit="ms",
            note="one turn, no tool call: a run borrows the pooled session and gives it back (tools from the "
            "cache, the graph with the server's tools built by the first run only).",
        )
    return Metric(
        "Agent.ainvoke with an MCP server (HTTP, session='per_run') / the same Agent without (report)",
        measure=agent_run,
        target=None,
        unit="ms",
        rounds=20,
        note="one turn, no tool call: the whole per-run MCP cost seen by a user (session open/close; the "
        "graph with the server's tools is built by the first run only).",
    )


def metrics() -> list[Metric]:
    held: dict[str, Held] = {}

    async def raw_session() -> ClientSession:
        if "session" not in held:
            held["session"] = Held(lambda: _raw_http_session(_http_url()))
        return await held["session"].get()  # type: ignore[no-any-return]

    async def our_echo() -> Any:
        if "echo" not in held:
            held["echo"] = Held(lambda: _our_echo(_http_url()))
        return await held["echo"].get()

    async def ours_warm() -> None:
        async with mcp_scope(MCPServer("everything", _http_url())) as scope:
            assert scope.tools

    async def anchor_warm() -> None:
        session = await raw_session()
        assert (await session.list_tools()).tools

    async def ours_call() -> None:
        echo = await our_echo()
        assert "hallo" in str(await echo.ainvoke({"message": "hallo"}))

    async def anchor_call() -> None:
        session = await raw_session()
        result = await session.call_tool("echo", {"message": "hallo"})
        assert "hallo" in result.content[0].text  # type: ignore[union-attr]

    async def release() -> None:
        for value in held.values():
            await value.close()
        held.clear()

    def warm(session: Session) -> tuple[float, float]:
        try:
            m = session.medians({"ours": ours_warm, "anchor": anchor_warm})
        finally:
            session.run(release)
        return m["ours"] * 1e3, m["anchor"] * 1e3

    def warm_uncached(session: Session) -> tuple[float, float]:
        try:
            m = session.medians({"ours": ours_warm, "anchor": anchor_warm}, {"ours": _clear_cache})
        finally:
            session.run(release)
        return m["ours"] * 1e3, m["anchor"] * 1e3

    def call(session: Session) -> tuple[float, float]:
        try:
            m = session.medians({"ours": ours_call, "anchor": anchor_call})
        finally:
            session.run(release)
        return m["ours"] * 1e3, m["anchor"] * 1e3

    def spawns(session: Session) -> tuple[float, float]:
        return float(session.run(spawns_per_run)), 1.0

    return [
        Metric(
            "MCP cold (stdio): mcp_scope open+load+close / SDK spawn+initialize+list_tools+close",
            ours_cold,
            anchor_cold,
            1.10,
            ours_setup=_clear_cache,
            rounds=10,
            note="server-everything over stdio (node); our tool-list cache is cleared before each sample.",
        ),
        Metric(
            "MCP warm (HTTP): per-run mcp_scope / list_tools on an open session",
            measure=warm,
            target=3.0,
            unit="ms",
            note="server-everything over streamable HTTP on 127.0.0.1; ours opens and closes one session per run.",
        ),
        Metric(
            "MCP warm (HTTP) without the tool-list cache: per-run mcp_scope / list_tools (report)",
            measure=warm_uncached,
            target=None,
            unit="ms",
            rounds=20,
            note="the same with the cache cleared before each of our samples (every run lists the tools).",
        ),
        _agent_metric("per_run"),
        _agent_metric("pooled"),
        Metric(
            "MCP tool call: everything__echo.ainvoke / session.call_tool",
            measure=call,
            target=1.2,
            unit="ms",
            note="both on an open streamable-HTTP session; ours through the renamed LangChain tool.",
        ),
        Metric(
            f"guard: stdio MCP processes spawned by one run with {TOOL_CALLS} tool calls / 1",
            measure=spawns,
            target=1.0,
            unit="processes",
            note="our FastMCP counter server over stdio writes its pid on start; never a spawn per tool call.",
        ),
    ]
