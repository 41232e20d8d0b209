"""The request half of every route in ``ai_utils.server``: authenticate, read a bounded JSON body, answer errors.

Each endpoint is wrapped by `endpoint`: it runs ``authenticate`` first, then refuses other methods with a JSON 405,
and turns every exception raised before a response exists into the §5 error object as JSON with a real status
(`failure_response`), never Starlette's ``text/plain`` 500 and never a traceback or the client's input. These
pieces are what the LangGraph Server routes reuse.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NoReturn, TypeAlias

from ai_utils._optional import missing_extra
from ai_utils.client import ErrorEvent
from ai_utils.exceptions import AiUtilsError, UserError
from ai_utils.gateway._http import actor_of, maybe_await, read_limited, too_deep
from ai_utils.gateway.actor import Actor
from ai_utils.streaming._encode import error_event, error_status, failure_event

try:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ImportError as _import_error:
    raise missing_extra("starlette", extra="server", feature="the HTTP routes") from _import_error

try:
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads  # also refuses NaN and Infinity, which are not JSON
except ImportError:  # pragma: no cover - orjson comes with langsmith
    _loads = json.loads

__all__ = [
    "MAX_DEPTH",
    "Authenticate",
    "RequestError",
    "actor_key",
    "endpoint",
    "error_response",
    "failure_response",
    "parse_cursor",
    "read_json",
    "refuse",
    "route",
]

Authenticate: TypeAlias = Callable[
    [Request], "Actor | Mapping[str, Any] | None | Awaitable[Actor | Mapping[str, Any] | None]"
]
"""``authenticate(request) -> Actor | None`` (sync or async); ``None`` (or an actor without ``user_id``) -> 401."""

MAX_DEPTH = 64
"""Request bodies nest lists/objects at most this deep (a deeper one is a 400, never a ``RecursionError``)."""

# Every route answers every method itself, so a wrong one gets our JSON 405 instead of the router's text one.
_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_CURSOR = re.compile(r"[0-9]{1,19}")
_MAX_CURSOR = 2**63 - 1
_log = logging.getLogger("ai_utils.server")

# Refusals that say the resource is busy or the id taken (retry later, or with another id): 409, not 400.
_CONFLICTS = frozenset({"SESSION_BUSY", "MESSAGE_ID_IN_USE"})

# The `type` of each error the HTTP layer itself answers (the others name the exception class).
_TYPES = {
    400: "BadRequest",
    401: "Unauthorized",
    404: "NotFound",
    405: "MethodNotAllowed",
    413: "PayloadTooLarge",
    415: "UnsupportedMediaType",
}


class RequestError(AiUtilsError):
    """A request the HTTP layer refuses before running anything; ``status`` is the HTTP status it answers."""

    def __init__(self, status: int, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = dict(headers or {})

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status, str(self)), {"headers": self.headers})


def refuse(status: int, message: str) -> NoReturn:
    """Stop the request with ``status`` and ``message`` (raised as `RequestError`)."""
    raise RequestError(status, message)


def error_response(event: ErrorEvent, status: int, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The §5 error object as the whole response: ``{"kind": "error", "type", "message"}`` with ``status``."""
    return JSONResponse(event, status_code=status, headers=dict(headers or {}))


def failure_response(exc: BaseException) -> JSONResponse:
    """The JSON error response for an exception raised before a response existed.

    `RequestError` -> its status; `UserError` -> 400 with its message (409 with its ``code`` for a busy session or
    a message id in use); any other error -> 500 with a generic
    message and an ``error_id`` under which the full text and traceback are logged.
    """
    if isinstance(exc, RequestError):
        if exc.status >= 500:
            _log.error("request failed: %s", exc)
        event: ErrorEvent = {"kind": "error", "type": _TYPES.get(exc.status, "Error"), "message": str(exc)}
        return error_response(event, exc.status, exc.headers)
    if isinstance(exc, UserError):
        _log.warning("request refused: %s: %s", type(exc).__name__, exc)
        event = error_event(exc)
        code = getattr(exc, "code", None)
        if isinstance(code, str):
            event["code"] = code  # e.g. SESSION_BUSY: a client branches on it, not on the message
        return error_response(event, 409 if code in _CONFLICTS else 400)
    return error_response(failure_event(exc), error_status(exc))


async def read_json(request: Request, max_body_bytes: int, *, required: bool = True) -> dict[str, Any]:
    """The body as a JSON object, or a `RequestError` with the status to answer.

    ``Content-Type: application/json`` (else 415), at most ``max_body_bytes`` (else 413, read no further),
    valid JSON (else 400), an object nested at most `MAX_DEPTH` deep (else 400).

    Requiring the JSON content type also makes a browser send a CORS preflight, so no form on another site
    can post here. An empty body is ``{}`` unless ``required``.
    """
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        refuse(415, f"Send the body as JSON with `Content-Type: application/json` (got {media or 'none'!r}).")
    raw = await read_limited(request, max_body_bytes)
    if raw is None:
        refuse(413, f"The body is over {max_body_bytes} bytes; send less (the server's `max_body_bytes`).")
    if not raw.strip():
        if required:
            refuse(400, "The body is empty; send a JSON object.")
        return {}
    try:
        body = _loads(raw)
    except (ValueError, RecursionError):
        refuse(400, "The body is not valid JSON; send a JSON object.")
    if too_deep(body, MAX_DEPTH):
        refuse(400, f"The body nests lists/objects deeper than {MAX_DEPTH} levels; send a flatter object.")
    if not isinstance(body, dict):
        refuse(400, f"The body must be a JSON object, not a JSON {type(body).__name__}.")
    return body


def parse_cursor(value: str | None, what: str = "cursor") -> int | None:
    """A cursor from a query parameter or header: a whole non-negative 63-bit integer (else 400), or ``None``."""
    if value is None:
        return None
    if not _CURSOR.fullmatch(value) or int(value) > _MAX_CURSOR:
        refuse(400, f"`{what}` must be the last cursor you read: a whole number from 0 to 2**63 - 1.")
    return int(value)


def actor_key(actor: Actor) -> str:
    """The owner key of ``actor``: its tenant and user id, unambiguous (JSON)."""
    return json.dumps([actor.tenant_id, actor.user_id], ensure_ascii=False)


async def _authenticate(authenticate: Authenticate | None, request: Request) -> Actor:
    if authenticate is None:
        refuse(
            401,
            "This endpoint serves no one: the server was set up without `authenticate=`. Pass `authenticate=` "
            "to agent_routes/session_routes/langgraph_api_routes (a function that checks the request and returns "
            "an Actor).",
        )
    actor = actor_of(await maybe_await(authenticate(request)))
    if actor is None:
        refuse(401, "Sign in first: this request carries no valid credentials.")
    return actor


Handler: TypeAlias = Callable[[Request, Actor], Awaitable[Response]]


def endpoint(
    handler: Handler, methods: Sequence[str], authenticate: Authenticate | None
) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint for ``handler(request, actor)``.

    ``authenticate`` runs first (no actor: 401, whatever the method), then other methods get a JSON 405; every
    exception before the response becomes `failure_response`.

    `route` registers it for every method, so a wrong one gets this JSON 405 (with ``Allow``), not the
    router's plain-text one.
    """
    allowed = ", ".join(methods)

    async def run(request: Request) -> Response:
        try:
            # Authentication comes first (SPEC §20: it runs before anything): a caller without credentials
            # learns nothing about the route, not even which methods it takes.
            actor = await _authenticate(authenticate, request)
            if request.method not in methods:
                raise RequestError(
                    405, f"{request.method} is not allowed here; use {allowed}.", headers={"Allow": allowed}
                )
            return await handler(request, actor)
        except Exception as exc:  # the top-level handler: whatever failed, the client gets the JSON error object
            return failure_response(exc)

    return run


def route(path: str, handler: Handler, methods: Sequence[str], authenticate: Authenticate | None, name: str) -> Route:
    """A Starlette `Route` for ``handler`` (see `endpoint`), matching every method."""
    return Route(path, endpoint(handler, methods, authenticate), methods=_ALL_METHODS, name=name)
