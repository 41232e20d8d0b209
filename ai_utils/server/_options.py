"""The options both route helpers take, checked once at construction, and the run context of a request."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, get_args

import anyio
from starlette.requests import Request

from ai_utils.exceptions import UserError
from ai_utils.gateway._http import maybe_await
from ai_utils.gateway.actor import Actor
from ai_utils.server._bodies import Protocol, RunRequest
from ai_utils.server._request import refuse

__all__ = ["ContextHook", "blocking", "check_options", "run_context"]

ContextHook: TypeAlias = Callable[[Request, Actor], Any | Awaitable[Any]]
"""``context(request, actor) -> context`` (sync or async): the run context the server gives the tools."""

_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")


def check_options(helper: str, path: str, protocol: Any, max_body_bytes: Any, authenticate: Any, context: Any) -> str:
    """``path`` without a trailing slash, or `UserError` for the first bad option."""
    if not isinstance(path, str) or not _PATH.fullmatch(path) or "{" in path:
        raise UserError(f"{helper}(path={path!r}): use a URL path starting with '/', e.g. '/agent'.")
    if protocol not in get_args(Protocol):
        raise UserError(f"{helper}(protocol={protocol!r}): use one of {', '.join(map(repr, get_args(Protocol)))}.")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise UserError(f"{helper}(max_body_bytes={max_body_bytes!r}): use a positive number of bytes, e.g. 1_048_576.")
    if authenticate is not None and not callable(authenticate):
        raise UserError(f"{helper}(authenticate=...) must be a function `(request) -> Actor | None`.")
    if context is not None and not callable(context):
        raise UserError(f"{helper}(context=...) must be a function `(request, actor) -> context`.")
    return path.rstrip("/") or "/"


async def run_context(hook: ContextHook | None, request: Request, actor: Actor, run: RunRequest) -> Any:
    """The run's context: the server's (``context=`` hook) or, without a hook, the body's ``context``."""
    if hook is None:
        return run.context
    if run.has_context:
        refuse(400, "This server sets the run context itself; leave `context` out of the body.")
    return await maybe_await(hook(request, actor))


async def blocking(store: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """Call a sync store method: inline for SQLite (microseconds), in a worker thread for Postgres (network)."""
    if getattr(store, "kind", None) == "postgres":
        return await anyio.to_thread.run_sync(fn, *args)
    return fn(*args)
