"""`MCPServer`: how to reach one MCP server. Plain data, importable without the `mcp` extra.

The wrappers (`Agent`, `DeepAgent`, `JevToolCaller`) accept servers at construction and validate them
here; the connection itself lives in `ai_utils.tools.mcp` (extra `mcp`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx

from ai_utils.exceptions import AiUtilsError, UserError

__all__ = ["MCPConnectionError", "MCPServer", "describe_mcp_servers", "normalize_mcp_servers"]

_MASK = "***"
_FIELDS = frozenset(
    {
        "name",
        "url",
        "command",
        "args",
        "headers",
        "auth",
        "description",
        "params",
        "env",
        "cwd",
        "idempotent",
        "session",
    }
)
_SESSION_MODES = ("per_run", "pooled")


@dataclass(frozen=True, repr=False)
class MCPServer:
    """One MCP server: a remote URL (streamable HTTP) or a local command (stdio).

    Its tools are named ``<name>__<tool>``, e.g. ``crm__get_contact``.

    Args:
        name: the server's name, the prefix of its tool names; non-empty, without ``__``.
        url: the streamable-HTTP endpoint, e.g. ``"https://crm.example.com/mcp"``.
        command: the executable of a stdio server, e.g. ``"npx"`` (instead of ``url``).
        args: arguments of ``command``.
        headers: HTTP headers sent with every request, e.g. ``{"Authorization": "Bearer ..."}``.
        auth: an ``httpx.Auth`` for the HTTP transport.
        description: what the server is for; agents add it to their system prompt.
        params: per-tool parameter candidates for `JevToolCaller`, keyed by the *unprefixed* tool name.
        env: environment of the stdio process (default: a safe subset of ours, chosen by the MCP SDK).
        cwd: working directory of the stdio process.
        idempotent: *unprefixed* names of this server's tools that are safe to run twice (durable sessions,
            SPEC §14); every other tool of the server counts as ``idempotent=False``.
        session: how long an MCP session lives. ``"per_run"``: each run opens its own session and closes it
            at the end. ``"pooled"``: a run borrows an idle session of this process (opening one when none
            is idle) and gives it back at the end; a session serves one run at a time, so concurrent runs
            never share one, and a session the server no longer knows (HTTP 404, e.g. after a restart) is
            initialised again. The pool is closed when the event loop ai_utils runs on ends, and at process
            exit. ``None`` (default): pooled when the server keeps no session state (a streamable-HTTP
            server that answers ``initialize`` without an ``Mcp-Session-Id``), else per run.

    Raises:
        UserError: for an empty name, a name containing ``__``, not exactly one of ``url``/``command``, or
            an unknown ``session``.
    """

    name: str
    url: str | None = None
    _: KW_ONLY
    command: str | None = None
    args: Sequence[str] = ()
    headers: Mapping[str, str] | None = None
    auth: httpx.Auth | None = field(default=None, compare=False)
    description: str | None = None
    params: Mapping[str, Any] | None = field(default=None, compare=False)
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    idempotent: Sequence[str] = ()
    session: Literal["per_run", "pooled"] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise UserError(
                f"MCPServer name {self.name!r} must be a non-empty string, e.g. `MCPServer('crm', url=...)`."
            )
        if "__" in self.name:
            raise UserError(
                f"MCPServer name {self.name!r} must not contain `__`: tools are named `<server>__<tool>`, "
                "so `__` separates the server from the tool. Use single underscores or dashes."
            )
        if isinstance(self.idempotent, str) or not all(isinstance(n, str) for n in self.idempotent):
            raise UserError(
                f"MCPServer {self.name!r} idempotent={self.idempotent!r} must be a list of tool names "
                "(without the server prefix), e.g. idempotent=['get_contact']."
            )
        object.__setattr__(self, "idempotent", tuple(self.idempotent))
        if self.session is not None and self.session not in _SESSION_MODES:
            raise UserError(
                f"MCPServer {self.name!r} session={self.session!r} is unknown; use `session='per_run'` (a session "
                "per run), `session='pooled'` (sessions reused across runs) or leave it out (pooled when the "
                "server keeps no session state)."
            )
        if (self.url is None) == (self.command is None):
            raise UserError(
                f"MCPServer {self.name!r} needs exactly one of `url` (a remote server over streamable HTTP) "
                "or `command` (a local stdio process), e.g. `MCPServer('crm', url='https://.../mcp')` or "
                "`MCPServer('files', command='npx', args=['-y', '@modelcontextprotocol/server-filesystem', '.'])`."
            )
        if self.url is not None and (not isinstance(self.url, str) or not self.url.startswith(("http://", "https://"))):
            raise UserError(
                f"MCPServer {self.name!r} url {_safe_url(str(self.url))!r} must start with `http://` or `https://`; "
                "for a local process pass `command=` and `args=` instead."
            )
        if self.command is not None and (not isinstance(self.command, str) or not self.command):
            raise UserError(f"MCPServer {self.name!r} command {self.command!r} must be a non-empty string.")
        if isinstance(self.args, str) or not all(isinstance(arg, str) for arg in self.args):
            raise UserError(
                f"MCPServer {self.name!r} args {self.args!r} must be a list of strings, e.g. `args=['server.py']`."
            )
        object.__setattr__(self, "args", tuple(self.args))
        for attr in ("headers", "params", "env"):
            value = getattr(self, attr)
            if value is not None:
                if not isinstance(value, Mapping):
                    raise UserError(f"MCPServer {self.name!r} `{attr}` must be a mapping, got {type(value).__name__}.")
                object.__setattr__(self, attr, MappingProxyType(dict(value)))

    @property
    def target(self) -> str:
        """Where the server lives, safe to log: the URL without its query, or the command line."""
        if self.url is not None:
            return _safe_url(self.url)
        return " ".join([str(self.command), *self.args])

    def __repr__(self) -> str:
        shown = [f"{attr}={text}" for attr, show in _REPR_FIELDS if (text := show(self)) is not None]
        return f"MCPServer({', '.join([repr(self.name), *shown])})"


def _masked(values: Mapping[str, str] | None) -> str | None:
    return repr(dict.fromkeys(values, _MASK)) if values else None


# How each field shows in `repr(server)`, None leaving it out: the URL without its query, secret values masked.
_REPR_FIELDS: tuple[tuple[str, Callable[[MCPServer], str | None]], ...] = (
    ("url", lambda server: None if server.url is None else repr(_safe_url(server.url))),
    ("command", lambda server: None if server.command is None else repr(server.command)),
    ("args", lambda server: repr(list(server.args)) if server.command is not None and server.args else None),
    ("headers", lambda server: _masked(server.headers)),
    ("auth", lambda server: None if server.auth is None else f"<{type(server.auth).__name__}>"),
    ("env", lambda server: _masked(server.env)),
    ("cwd", lambda server: None if server.cwd is None else repr(str(server.cwd))),
    ("description", lambda server: None if server.description is None else repr(server.description)),
    ("params", lambda server: f"<{', '.join(server.params)}>" if server.params else None),
    ("session", lambda server: None if server.session is None else repr(server.session)),
)


class MCPConnectionError(AiUtilsError):
    """An MCP server could not be reached, or failed to list its tools.

    Attributes:
        server: the name of the server that failed.
    """

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


def normalize_mcp_servers(
    servers: MCPServer | Mapping[str, Any] | Sequence[MCPServer | Mapping[str, Any]] | None,
) -> tuple[MCPServer, ...]:
    """Validate the ``mcp_server=`` argument of a wrapper into a tuple of servers.

    Args:
        servers: one server, a sequence of servers, or ``None``. A mapping is read as the keyword
            arguments of `MCPServer` (the seed's ``{name, url, headers, description}`` shape).

    Returns:
        The servers, in order; empty for ``None``.

    Raises:
        UserError: for an item that is no server, or two servers with the same name.
    """
    if servers is None:
        return ()
    items = [servers] if isinstance(servers, MCPServer | Mapping) else list(servers)
    result: list[MCPServer] = []
    for item in items:
        if isinstance(item, Mapping):
            unknown = set(item) - _FIELDS
            if unknown:
                raise UserError(
                    f"MCP server settings {sorted(unknown)!r} are unknown; "
                    f"use the `MCPServer` fields {sorted(_FIELDS)!r}."
                )
            item = MCPServer(**item)
        elif not isinstance(item, MCPServer):
            raise UserError(
                f"mcp_server item {item!r} is not an `MCPServer`; build one with `MCPServer(name, url=...)`."
            )
        if any(known.name == item.name for known in result):
            raise UserError(
                f"Two MCP servers are named {item.name!r}; server names prefix the tool names and must be unique."
            )
        result.append(item)
    return tuple(result)


def describe_mcp_servers(servers: Sequence[MCPServer]) -> str:
    """The system-prompt block that tells an agent what each described MCP server is for.

    Args:
        servers: the run's servers; those without a ``description`` are left out.

    Returns:
        One line per described server, e.g. ``"MCP server `crm` (tools `crm__*`): CRM data."``;
        an empty string when no server has a description.
    """
    lines = [
        f"MCP server `{server.name}` (tools `{server.name}__*`): {server.description.strip()}"
        for server in servers
        if server.description and server.description.strip()
    ]
    return "\n".join(lines)


def _safe_url(url: str) -> str:
    """The URL without credentials, query or fragment: those may carry secrets."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port is not None else host
    except ValueError:
        return _MASK
    query = _MASK if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
