"""`create_feedback_route`: the ASGI endpoint that checks origin, authenticates, validates and stores feedback."""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from ai_utils._optional import missing_extra
from ai_utils.gateway.actor import Actor, to_actor
from ai_utils.gateway.feedback._sinks import FeedbackSink
from ai_utils.gateway.feedback._validation import FeedbackEntry, FeedbackValidationError, validate_feedback

__all__ = ["MAX_BODY_BYTES", "MAX_DEPTH", "create_feedback_route"]

logger = logging.getLogger("ai_utils.gateway.feedback")

# The feedback route answers 413 past this body size and 400 past this nesting of lists/objects.
MAX_BODY_BYTES = 64 * 1024
MAX_DEPTH = 16


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _origin(url: str) -> tuple[str, str] | None:
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme.lower(), f"{(parts.hostname or '').lower()}:{port}"


def _trusted_site(site_url: str | Callable[[], str | None] | None) -> str | None:
    value = site_url() if callable(site_url) else site_url
    if value:
        return value
    for name in ("NEXT_PUBLIC_SITE_URL", "SITE_URL", "DOMAIN_URL"):
        if os.environ.get(name):
            return os.environ[name]
    return None


def _cross_origin(request: Any, site_url: str | Callable[[], str | None] | None) -> bool:
    sent = request.headers.get("origin") or request.headers.get("referer")
    if not sent:
        return False  # not a browser form post (curl, server-to-server): nothing to forge
    trusted = _trusted_site(site_url) or f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"
    return _origin(sent) != _origin(trusted)


async def _store(sink: FeedbackSink, entry: FeedbackEntry, run_in_threadpool: Any) -> None:
    awrite = getattr(sink, "awrite", None)
    if awrite is not None:
        await awrite(entry)
    else:
        await run_in_threadpool(sink.write, entry)


async def _read_limited(request: Any) -> bytes | None:
    """The body, or ``None`` once it passes `MAX_BODY_BYTES` (read no further than that)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _json_body(request: Any) -> dict[str, Any] | tuple[int, str]:
    """The body as a JSON object, or the ``(status, message)`` to answer instead."""
    raw = await _read_limited(request)
    if raw is None:
        return 413, f"The body is over {MAX_BODY_BYTES} bytes. Send a shorter comment and less metadata."
    too_deep = 400, f"The body is nested deeper than {MAX_DEPTH} levels. Send flatter metadata."
    try:
        body = json.loads(raw)
    except RecursionError:
        return too_deep
    except ValueError:
        return 400, "The body must be JSON."
    if _too_deep(body):
        return too_deep
    if not isinstance(body, dict):
        return 400, "The body must be a JSON object."
    return body


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests lists/objects deeper than `MAX_DEPTH` (iterative: no recursion limit)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


Authenticate = Callable[[Any], "Mapping[str, Any] | Actor | None | Awaitable[Mapping[str, Any] | Actor | None]"]


def create_feedback_route(
    *,
    authenticate: Authenticate,
    sink: FeedbackSink,
    enrich_entry: Callable[[FeedbackEntry, dict[str, Any]], Any] | None = None,
    telemetry: Callable[[FeedbackEntry], Any] | None = None,
    site_url: str | Callable[[], str | None] | None = None,
) -> Callable[[Any], Awaitable[Any]]:
    """Build an async Starlette endpoint that stores feedback: check origin, authenticate, validate, write.

    Answers (JSON): 403 ``{"error"}`` for a cross-origin browser request (``Origin``, or ``Referer`` when there
    is no ``Origin``, differs from the trusted site), 401 when ``authenticate`` returns ``None`` or an actor
    without ``user_id``, 413 for a body over 64 KiB (`MAX_BODY_BYTES`), 400 for a body that is not valid
    feedback or nests lists/objects deeper than 16 levels (`MAX_DEPTH`), 403 for a body whose
    ``tenant_id`` is not the actor's, 500 when the sink fails, 200 ``{"ok": true, "request_id"}``.

    The stored ``user_id`` and ``tenant_id`` are always the authenticated actor's (a ``user_id`` in the body
    is ignored, also after ``enrich_entry``).

    Args:
        authenticate: ``(request) -> {"actor": Actor | mapping} | Actor | None`` (sync or async).
        sink: a `FeedbackSink`; ``awrite`` is used when present, ``write`` runs in a worker thread.
        enrich_entry: ``(entry, {"actor", "request"}) -> FeedbackEntry | mapping`` (sync or async) before writing.
        telemetry: ``(entry) -> None`` (sync or async) after writing; its errors are logged only.
        site_url: the trusted origin (or a function returning it); default ``NEXT_PUBLIC_SITE_URL``,
            ``SITE_URL`` or ``DOMAIN_URL``, else the request's own origin.

    Returns:
        The endpoint, for ``starlette.routing.Route(path, endpoint, methods=["POST"])``.
    """
    try:
        from starlette.concurrency import run_in_threadpool
        from starlette.requests import Request
        from starlette.responses import JSONResponse
    except ImportError as _import_error:  # pragma: no cover - starlette ships with the dev environment
        raise missing_extra("starlette", extra="server", feature="create_feedback_route") from _import_error

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status)

    async def endpoint(request: Request) -> JSONResponse:
        if _cross_origin(request, site_url):
            return error(403, "Cross-origin feedback is not allowed.")
        auth = await _maybe_await(authenticate(request))
        actor = to_actor(auth if isinstance(auth, Actor) or auth is None else auth.get("actor"))
        if actor is None or not actor.user_id:
            return error(401, "Sign in to send feedback.")
        body = await _json_body(request)
        if isinstance(body, tuple):
            return error(*body)
        claimed = body.get("tenant_id", body.get("tenantId"))
        if claimed is not None and claimed != actor.tenant_id:
            return error(403, "Feedback can only be sent for your own tenant; leave tenant_id out.")
        body = {k: v for k, v in body.items() if k not in ("user_id", "userId", "tenant_id", "tenantId")}
        identity = {"user_id": actor.user_id, "tenant_id": actor.tenant_id}
        try:
            entry = validate_feedback({**body, **identity})
            if enrich_entry is not None:
                entry = validate_feedback(await _maybe_await(enrich_entry(entry, {"actor": actor, "request": request})))
                entry = replace(
                    entry, user_id=actor.user_id, tenant_id=actor.tenant_id
                )  # the stored identity is the authenticated actor's, always
        except FeedbackValidationError as err:
            return error(400, str(err))
        try:
            await _store(sink, entry, run_in_threadpool)
        except Exception:
            logger.exception("Feedback sink failed for request %s", entry.request_id)
            return error(500, "Feedback could not be stored. Try again later.")
        if telemetry is not None:
            try:
                await _maybe_await(telemetry(entry))
            except Exception:
                logger.exception("Feedback telemetry failed for request %s", entry.request_id)
        return JSONResponse({"ok": True, "request_id": entry.request_id})

    return endpoint
