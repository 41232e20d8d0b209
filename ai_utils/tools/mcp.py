"""The MCP scope: one session per server for one run (closed at its end), or one lent from a pool.

A per-run session closes on success, error and cancellation; a pooled one (`MCPServer.session`) is lent
from the loop's pool and given back (`ai_utils.tools._mcp_pool`).

```python
async with mcp_scope([MCPServer("crm", url="https://crm.example.com/mcp")]) as scope:
    scope.tools                   # LangChain tools named `crm__<tool>`, bound to the open session
    scope.system_prompt_addition  # what each server is for, for the agent's system prompt
```

Each server's session lives in a task of its own, which enters and leaves the MCP SDK's contexts (anyio
task groups and cancel scopes) in that one task. So the block may end in another task (an abandoned
``astream`` generator), be cancelled, or raise: the sessions still close, and the block's exception is
never wrapped in an anyio ``ExceptionGroup``.

MCP tools are async-only (``tool.invoke`` raises `NotImplementedError`); sync entry points run the whole
async run under `ai_utils._utils.run_sync`.

A pooled session serves one run at a time. Its tools always call the holder's current session: when the
server answers a call with HTTP 404 (it forgot the session: a restart, an expiry), the holder initialises
a new session in its task and the call is sent again (the server did not run it).

Tool definitions are cached per process (`ai_utils.tools._mcp_cache`, see `clear_tool_cache`): a run still
opens and initializes its own session, but it lists a server's tools only the first time (and again after
``TOOL_CACHE_TTL`` seconds, or when the server config or the server's reported name/version changes), which
saves a round trip and the schema transfer on every run. The cached definitions are bound to each run's
session, so every call still goes through that run's connection.

Graphs that outlive a run (`Agent`, `DeepAgent`) are built once with `MCPScope.routed_tools` instead: the
same tools, tied to no session; each call goes to the session of the run it happens in, which that run puts
into its config with `MCPScope.bind`. `MCPScope.signature` tells when the servers' tools changed and such a
graph must be built again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import Context
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from ai_utils._optional import missing_extra
from ai_utils.tools._mcp_cache import ToolCacheKey, cache_key, clear_tool_cache, connection_key, tool_definitions
from ai_utils.tools._mcp_config import MCPConnectionError, MCPServer, describe_mcp_servers, normalize_mcp_servers
from ai_utils.tools._mcp_pool import Pool, PooledSession, loop_pool

try:
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.interceptors import MCPToolCallRequest, MCPToolCallResult
    from langchain_mcp_adapters.sessions import Connection
    from langchain_mcp_adapters.tools import convert_mcp_tool_to_langchain_tool
    from mcp import ClientSession
    from mcp.shared.exceptions import McpError
    from mcp.types import CONNECTION_CLOSED, INVALID_REQUEST
    from mcp.types import Tool as MCPTool
except ImportError as _import_error:
    raise missing_extra("langchain-mcp-adapters", extra="mcp", feature="MCP servers") from _import_error

__all__ = ["MCPConnectionError", "MCPScope", "MCPServer", "clear_tool_cache", "mcp_scope"]

logger = logging.getLogger(__name__)

# Seconds for the MCP handshake plus the tool listing of one server; a server that accepts the
# connection but never answers would otherwise hang the run.
CONNECT_TIMEOUT = 30.0
# Seconds to wait for the sessions to close before the run returns; closing goes on in the background.
CLOSE_TIMEOUT = 10.0
# The MCP SDK's HTTP defaults: 30 s to connect/write, 300 s to read, since a server may hold a stream open.
_DEFAULT_HTTP_TIMEOUT = httpx.Timeout(30.0, read=300.0)
# The run config key under which a run's sessions travel to its routed tools (``__``: never traced or stored).
_SESSIONS_KEY = "__ai_utils_mcp_sessions"
# Tools bound to no session need some connection; their interceptor never lets the adapter use it.
_UNUSED: Connection = {"transport": "stdio", "command": "unused", "args": []}


@dataclass(frozen=True)
class MCPScope:
    """The MCP tools of one run, usable while the ``async with mcp_scope(...)`` block is open.

    Attributes:
        servers: the servers, in the order given.
        tools: every server's tools, named ``<server>__<tool>``; each carries
            ``metadata["mcp_server"]`` and ``metadata["mcp_tool"]`` (the unprefixed name).
        tools_by_server: the same tools, grouped by server name.
    """

    servers: tuple[MCPServer, ...] = ()
    tools_by_server: Mapping[str, list[BaseTool]] = field(default_factory=dict)
    _holders: Mapping[str, _SessionHolder] = field(default_factory=dict, repr=False)

    @property
    def tools(self) -> list[BaseTool]:
        """Every server's tools, in server order."""
        return [tool for server in self.servers for tool in self.tools_by_server.get(server.name, [])]

    @property
    def signature(self) -> tuple[tuple[str, ...], ...]:
        """What the servers list, as comparable data: equal signatures mean `routed_tools` would be equal."""
        return tuple(self._holders[server.name].signature for server in self.servers)

    def routed_tools(self) -> list[BaseTool]:
        """The same tools as `tools`, bound to no session: a call goes to the session of the run it runs in.

        Build a long-lived graph with these and run it with a config from `bind`; the graph then serves every
        later run whose scope has the same `signature`. A call in a run whose config carries no session of the
        tool's server raises `MCPConnectionError` (a routed tool never opens a connection of its own).
        """
        return [
            _routed_tool(server.name, definition)
            for server in self.servers
            for definition in self._holders[server.name].definitions
        ]

    def bind(self, config: RunnableConfig) -> RunnableConfig:
        """``config`` plus this scope's sessions, for a run of a graph built with `routed_tools`."""
        configurable = {**config.get("configurable", {}), _SESSIONS_KEY: self._holders}
        return {**config, "configurable": configurable}

    @property
    def system_prompt_addition(self) -> str:
        """What each described server is for (see `describe_mcp_servers`); empty when none has a description."""
        return describe_mcp_servers(self.servers)


@asynccontextmanager
async def mcp_scope(
    servers: MCPServer | Mapping[str, Any] | Sequence[MCPServer | Mapping[str, Any]] | None,
) -> AsyncIterator[MCPScope]:
    """Open (or borrow from the pool) one session per MCP server for the block and load its tools.

    Every tool call inside the block goes through that one session (a stdio server is spawned once per
    scope, never per call). A per-run session (`MCPServer.session`) closes when the block ends: on success,
    on an exception and on cancellation; a pooled one goes back to the pool after a block that ended
    normally (and closes otherwise). Tool errors reported by a server come back as an error `ToolMessage`
    (or its text), so the model can react; a broken connection raises.

    Args:
        servers: one server, several, or ``None`` (an empty scope that connects to nothing).

    Yields:
        The `MCPScope` with the loaded tools.

    Raises:
        UserError: for invalid servers or duplicate server names.
        MCPConnectionError: when a server cannot be reached or fails to list its tools; ``.server`` names it.
    """
    resolved = normalize_mcp_servers(servers)
    pool = loop_pool() if any(server.session != "per_run" for server in resolved) else None
    holders = [_SessionHolder.lease(server, pool) for server in resolved]
    ended = False
    try:
        tools_by_server = {holder.server.name: await holder.tools_for_run() for holder in holders}
        yield MCPScope(
            servers=resolved,
            tools_by_server=tools_by_server,
            _holders={holder.server.name: holder for holder in holders},
        )
        ended = True
    finally:
        kept = [holder for holder in holders if ended and pool is not None and holder.give_back(pool)]
        await _close([holder for holder in holders if holder not in kept])


class _SessionHolder:
    """One server's session, entered and left inside its own task; the guard of every call through it.

    A pooled holder outlives the run that opened it (`mcp_scope` gives it back to the loop's pool) and opens
    its session again when the server no longer knows it (`reconnect`).
    """

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.ready: asyncio.Future[list[BaseTool]] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        self.broken = False
        self.pooled = False
        self.session: ClientSession | None = None
        self.definitions: list[MCPTool] = []
        self.signature: tuple[str, ...] = ()
        self.tools: list[BaseTool] = []
        self.key: ToolCacheKey = ()
        self.generation = 0  # counts the sessions opened, so concurrent callers reconnect a stale one once
        self._released = False
        self._reused = False
        self._wake = asyncio.Event()  # set to close the session (`_released`) or to open it again
        self._fresh = asyncio.Event()  # set while a session is open, or once the holder closed
        self._session_ids: list[str] = []
        self._calls: set[anyio.CancelScope] = set()

    @classmethod
    def start(cls, server: MCPServer) -> _SessionHolder:
        holder = cls(server)
        # A pooled session outlives the run that opened it: its task must not carry that run's context.
        holder.task = asyncio.create_task(holder._hold(), name=f"mcp-session-{server.name}", context=Context())
        holder.task.add_done_callback(holder._report)
        return holder

    @classmethod
    def lease(cls, server: MCPServer, pool: Pool[PooledSession] | None) -> _SessionHolder:
        """An idle pooled session of ``server`` (owned by the caller until given back), else a new one."""
        if pool is not None and server.session != "per_run":
            holder = pool.take(_pool_key(server))
            if isinstance(holder, _SessionHolder):
                holder._reused = True
                return holder
        return cls.start(server)

    async def tools_for_run(self) -> list[BaseTool]:
        """This server's tools for the run: once connected, or, for a borrowed session, with a fresh listing."""
        if not self._reused:
            return await self.ready
        self._reused = False
        generation = self.generation
        try:
            assert self.session is not None  # a pooled holder is only given back while its session is open
            definitions, signature = await tool_definitions(self.session, self.key)
        except McpError as exc:
            if not _session_terminated(exc):
                raise self._lost(exc) from exc
            await self.reconnect(generation)  # the new session lists (or takes from the cache) on its own
            return self.tools
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise self._lost(exc) from exc
        if signature != self.signature:
            self._install(definitions, signature)
        return self.tools

    def give_back(self, pool: Pool[PooledSession]) -> bool:
        """Return this session to ``pool`` when it may serve another run; ``False``: close it instead."""
        return self.pooled and not self.closed and not self.broken and pool.give(_pool_key(self.server), self)

    async def aclose(self) -> None:
        await _close([self])

    def release(self) -> None:
        self._released = True
        self._wake.set()

    async def _hold(self) -> None:
        name = self.server.name
        try:
            while not self._released:
                self._session_ids.clear()
                client = MultiServerMCPClient({name: _connection(self.server, self._session_ids)})
                async with client.session(name, auto_initialize=False) as session:
                    with anyio.fail_after(CONNECT_TIMEOUT):
                        info = (await session.initialize()).serverInfo
                        self.key = cache_key(self.server, info)
                        definitions, signature = await tool_definitions(session, self.key)
                    # Pooled when asked for, or by default when the server keeps no session state: over
                    # streamable HTTP it then answers `initialize` without an `Mcp-Session-Id` (MCP spec,
                    # "Session Management"); a stdio process is one session, so it never counts as stateless.
                    stateless = self.server.url is not None and not self._session_ids
                    self.pooled = self.server.session == "pooled" or (self.server.session is None and stateless)
                    self.session = session
                    self._install(definitions, signature)
                    if not self.ready.done():  # the scope may have been cancelled meanwhile
                        self.ready.set_result(self.tools)
                    self._fresh.set()
                    await self._wake.wait()
                    self._wake.clear()
                    self.session = None
        except Exception as exc:
            if self.ready.done():
                # The run is over (or its calls fail on their own); a server failing must not mask that.
                logger.warning("MCP server %r (%s) failed: %r", self.server.name, self.server.target, exc)
            else:
                error = _connection_error(self.server, exc)
                error.__cause__ = exc
                self.ready.set_exception(error)
        finally:
            self.closed = True
            self._fresh.set()  # wakes callers waiting for a reconnect: they find the holder closed
            # The MCP SDK may not answer requests still waiting when its session dies; end them here.
            for call in self._calls:
                call.cancel()

    def _install(self, definitions: list[MCPTool], signature: tuple[str, ...]) -> None:
        if signature != self.signature or not self.tools:
            # Tools that always call the holder's current session, which changes when it reconnects.
            self.tools = [_prefixed(self._tool(definition), self.server.name) for definition in definitions]
        self.definitions, self.signature = definitions, signature

    def _tool(self, definition: MCPTool) -> BaseTool:
        async def route(
            request: MCPToolCallRequest, handler: Callable[[MCPToolCallRequest], Awaitable[MCPToolCallResult]]
        ) -> MCPToolCallResult:
            return await self.call(request)

        return convert_mcp_tool_to_langchain_tool(
            None, definition, connection=_UNUSED, server_name=self.server.name, tool_interceptors=[route]
        )

    async def reconnect(self, generation: int) -> None:
        """Open the session again when it is still the one of ``generation`` (the server forgot it: HTTP 404)."""
        if generation == self.generation and not self.closed:
            self.generation += 1
            self._fresh.clear()
            self._wake.set()
            logger.info(
                "MCP server %r (%s) lost its session; initialising a new one", self.server.name, self.server.target
            )
        with anyio.move_on_after(CONNECT_TIMEOUT + CLOSE_TIMEOUT):
            await self._fresh.wait()
        if self.closed or self.session is None:
            raise self._lost(None)

    async def call(self, request: MCPToolCallRequest) -> MCPToolCallResult:
        """Call a tool through this holder's current session, guarded: a closed or broken session raises."""
        cause: BaseException | None = None
        if not self.closed:
            with anyio.CancelScope() as call:
                self._calls.add(call)
                try:
                    generation = self.generation
                    try:
                        return await self._call_session(request)
                    except McpError as exc:
                        # The server forgot a pooled session (a restart, an expiry): it did not run the call,
                        # so calling again on a new session is safe. A per-run session's state is gone.
                        if not (self.pooled and _session_terminated(exc)):
                            raise
                    await self.reconnect(generation)
                    return await self._call_session(request)
                except (McpError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
                    if isinstance(exc, McpError) and exc.error.code != CONNECTION_CLOSED:
                        raise  # a JSON-RPC error answered by a live server, e.g. invalid arguments
                    cause = exc
                except MCPConnectionError:
                    self.broken = True
                    raise
                finally:
                    self._calls.discard(call)
        self.broken = True
        raise MCPConnectionError(
            f"The session of MCP server {self.server.name!r} at {self.server.target!r} is closed or was lost "
            f"while calling its tool {request.name!r}. Call MCP tools only inside their `mcp_scope` block, "
            "and check that the server is still running.",
            server=self.server.name,
        ) from cause

    async def _call_session(self, request: MCPToolCallRequest) -> MCPToolCallResult:
        if self.session is None and not self.closed:
            with anyio.move_on_after(CONNECT_TIMEOUT):
                await self._fresh.wait()  # another call is opening the session again
        session = self.session
        if session is None:
            raise anyio.ClosedResourceError
        return await session.call_tool(request.name, request.args)

    def _lost(self, cause: BaseException | None) -> MCPConnectionError:
        self.broken = True
        error = MCPConnectionError(
            f"The session of MCP server {self.server.name!r} at {self.server.target!r} was lost and could not be "
            "opened again. Check that the server is still running.",
            server=self.server.name,
        )
        error.__cause__ = cause
        return error

    def _report(self, task: asyncio.Task[None]) -> None:
        if not self.ready.done():
            self.ready.cancel()  # the holder was cancelled before connecting: never leave the scope waiting
        elif not self.ready.cancelled():
            self.ready.exception()  # marks a connection error as seen when the scope ended before awaiting it


def _pool_key(server: MCPServer) -> ToolCacheKey:
    # The name too: a session's tools carry it as their prefix.
    return (server.name, *connection_key(server))


def _session_terminated(exc: McpError) -> bool:
    """The MCP SDK's answer to HTTP 404 on a request: the server does not know the session (any more)."""
    return abs(exc.error.code) == abs(INVALID_REQUEST) and exc.error.message == "Session terminated"


async def _close(holders: Sequence[_SessionHolder]) -> None:
    for holder in holders:
        holder.release()
    tasks = [holder.task for holder in holders if holder.task is not None and not holder.task.done()]
    if not tasks:
        return
    closing = asyncio.ensure_future(asyncio.wait(tasks, timeout=CLOSE_TIMEOUT))
    cancelled = False
    # A run cancelled while its sessions close (a consumer that stops just as the run ends) still lets them
    # close, bounded by CLOSE_TIMEOUT; otherwise its event loop could end under them, the server never told.
    while not closing.done():
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            cancelled = True
    _, pending = closing.result()
    for task in pending:
        task.cancel()
    if cancelled:
        raise asyncio.CancelledError


def _routed_tool(server_name: str, definition: MCPTool) -> BaseTool:
    """A LangChain tool for ``definition`` whose calls go to the session of the calling run (see `MCPScope.bind`)."""

    async def route(
        request: MCPToolCallRequest, handler: Callable[[MCPToolCallRequest], Awaitable[MCPToolCallResult]]
    ) -> MCPToolCallResult:
        # `handler` would open a connection per call; the run's session is the one to use.
        config = getattr(request.runtime, "config", None) or {}
        holder = config.get("configurable", {}).get(_SESSIONS_KEY, {}).get(server_name)
        if holder is None:
            raise MCPConnectionError(
                f"MCP tool {server_name}__{definition.name} was called outside a run that holds a session of "
                f"server {server_name!r}. Run the graph through the agent (or with `scope.bind(config)` inside "
                "its `mcp_scope` block).",
                server=server_name,
            )
        result: MCPToolCallResult = await holder.call(request)
        return result

    tool = convert_mcp_tool_to_langchain_tool(
        None, definition, connection=_UNUSED, server_name=server_name, tool_interceptors=[route]
    )
    return _prefixed(tool, server_name)


def _connection(server: MCPServer, session_ids: list[str]) -> Connection:
    if server.url is not None:
        factory = functools.partial(_http_client, session_ids=session_ids)
        http: dict[str, Any] = {"transport": "streamable_http", "url": server.url, "httpx_client_factory": factory}
        if server.headers:
            http["headers"] = dict(server.headers)
        if server.auth is not None:
            http["auth"] = server.auth
        return http  # type: ignore[return-value]  # a StreamableHttpConnection built key by key
    stdio: dict[str, Any] = {"transport": "stdio", "command": server.command, "args": list(server.args)}
    if server.env is not None:
        stdio["env"] = dict(server.env)
    if server.cwd is not None:
        stdio["cwd"] = server.cwd
    return stdio  # type: ignore[return-value]  # a StdioConnection built key by key


def _http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx.Timeout | None = None,
    auth: httpx.Auth | None = None,
    *,
    session_ids: list[str],
) -> httpx.AsyncClient:
    async def record_session_id(response: httpx.Response) -> None:
        # Whether the server keeps session state: the SDK reads the header, but does not hand it on.
        if session_id := response.headers.get("mcp-session-id"):
            session_ids.append(session_id)

    # The MCP SDK's default factory builds a fresh SSL context per session (~20 ms of certificate
    # loading); one shared context keeps opening a session per run cheap.
    return httpx.AsyncClient(
        headers=headers,
        timeout=timeout or _DEFAULT_HTTP_TIMEOUT,
        auth=auth,
        verify=_ssl_context(),
        event_hooks={"response": [record_session_id]},
    )


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def _prefixed(tool: BaseTool, server_name: str) -> BaseTool:
    # The adapter's tool calls the MCP tool by the name it captured at load time, so renaming the
    # LangChain tool changes only what the model sees.
    original = tool.name
    tool.name = f"{server_name}__{original}"
    tool.metadata = {**(tool.metadata or {}), "mcp_server": server_name, "mcp_tool": original}
    return tool


def _connection_error(server: MCPServer, exc: Exception) -> MCPConnectionError:
    cause = "; ".join(_describe(leaf) for leaf in _leaves(exc))
    fix = (
        "Start the server or fix its `url`."
        if server.url is not None
        else "Install the command or fix `command`/`args`."
    )
    return MCPConnectionError(
        f"Could not connect to MCP server {server.name!r} at {server.target!r}: {cause}. {fix}",
        server=server.name,
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT:g} s"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
