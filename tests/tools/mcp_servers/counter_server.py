"""A stateful FastMCP test server: a per-session counter, a session report and a failing tool.

Usage: ``python counter_server.py stdio PIDFILE``, ``python counter_server.py http PORT`` or
``python counter_server.py http-stateless PORT``.

- stdio: appends its pid to PIDFILE on start, so tests can count spawned processes and check they exit.
- http: serves streamable HTTP on 127.0.0.1:PORT/mcp and records the session ids the client terminated
  (HTTP DELETE) at ``GET /_closed``, so tests can observe that a session was closed, and counts the
  ``tools/list`` requests it answered at ``GET /_list_tools`` (tests of the client's tool-list cache) and the
  ``initialize`` requests at ``GET /_initialized`` (tests of pooled sessions).
- http-stateless: the same, but the server keeps no session state (FastMCP ``stateless_http``): it answers
  ``initialize`` without an ``Mcp-Session-Id``.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from starlette.requests import Request
from starlette.responses import JSONResponse

mode = sys.argv[1]
port = int(sys.argv[2]) if mode.startswith("http") else 8000
server = FastMCP("counter", host="127.0.0.1", port=port, log_level="WARNING", stateless_http=mode == "http-stateless")

# Keyed by the session object itself, weakly: an id() key could be reused by a later session after the old
# one is freed, which handed that new session the old count (a flaky "2 == 1").
_counts: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_closed: list[str] = []
_list_tools_requests = [0]
_initialize_requests = [0]


@server.tool()
def increment(ctx: Context[Any, Any, Any]) -> int:
    """Add one to this session's counter and return it."""
    key = ctx.session
    _counts[key] = _counts.get(key, 0) + 1
    return _counts[key]


@server.tool()
def whoami(ctx: Context[Any, Any, Any]) -> dict[str, Any]:
    """Report the server process, its cwd and env, and the MCP session id and auth headers of this call."""
    request = ctx.request_context.request
    headers = request.headers if request is not None else {}
    return {
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "greeting": os.environ.get("COUNTER_GREETING"),
        "session_id": headers.get("mcp-session-id"),
        "authorization": headers.get("authorization"),
        "tenant": headers.get("x-tenant"),
    }


@server.tool()
def fail(message: str) -> str:
    """Always fail with the given message."""
    raise ValueError(message)


@server.custom_route("/_closed", methods=["GET"])
async def closed(request: Request) -> JSONResponse:
    return JSONResponse(_closed)


@server.custom_route("/_list_tools", methods=["GET"])
async def list_tools_requests(request: Request) -> JSONResponse:
    return JSONResponse(_list_tools_requests[0])


@server.custom_route("/_initialized", methods=["GET"])
async def initialize_requests(request: Request) -> JSONResponse:
    return JSONResponse(_initialize_requests[0])


def _counting_list_tools() -> None:
    handlers = server._mcp_server.request_handlers
    answer = handlers[types.ListToolsRequest]

    async def counted(request: types.ListToolsRequest) -> types.ServerResult:
        _list_tools_requests[0] += 1
        return await answer(request)

    handlers[types.ListToolsRequest] = counted


_counting_list_tools()


def _recording_deletes(app: Any) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            headers = dict(scope["headers"])
            _closed.append(headers.get(b"mcp-session-id", b"").decode())

        async def counting_receive() -> Any:
            message = await receive()
            body = message.get("body", b"") if message["type"] == "http.request" else b""
            if b'"method":"initialize"' in body.replace(b" ", b""):
                _initialize_requests[0] += 1
            return message

        await app(scope, counting_receive, send)

    return wrapped


if __name__ == "__main__":
    if mode == "stdio":
        with open(sys.argv[2], "a") as pidfile:
            pidfile.write(f"{os.getpid()}\n")
        server.run(transport="stdio")
    else:
        import uvicorn

        uvicorn.run(_recording_deletes(server.streamable_http_app()), host="127.0.0.1", port=port, log_level="warning")
