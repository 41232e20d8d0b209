"""`create_feedback_route`: the ASGI endpoint that checks origin, authenticates, validates and stores feedback."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from ai_utils._optional import missing_extra
from ai_utils.gateway._http import actor_of, cross_origin, maybe_await, read_limited, too_deep
from ai_utils.gateway.actor import Actor
from ai_utils.gateway.feedback._sinks import FeedbackSink
from ai_utils.gateway.feedback._validation import FeedbackEntry, FeedbackValidationError, validate_feedback

__all__ = ["MAX_BODY_BYTES", "MAX_DEPTH", "create_feedback_route"]

logger = logging.getLogger("ai_utils.gateway.feedback")

# The feedback route answers 413 past this body size and 400 past this nesting of lists/objects.
MAX_BODY_BYTES = 64 * 1024
MAX_DEPTH = 16


async def _store(sink: FeedbackSink, entry: FeedbackEntry, run_in_threadpool: Any) -> None:
    awrite = getattr(sink, "awrite", None)
    if awrite is not None:
        await awrite(entry)
    else:
        await run_in_threadpool(sink.write, entry)


async def _json_body(request: Any) -> dict[str, Any] | tuple[int, str]:
    """The body as a JSON object, or the ``(status, message)`` to answer instead."""
    raw = await read_limited(request, MAX_BODY_BYTES)
    if raw is None:
        return 413, f"The body is over {MAX_BODY_BYTES} bytes. Send a shorter comment and less metadata."
    too_deep_answer = 400, f"The body is nested deeper than {MAX_DEPTH} levels. Send flatter metadata."
    try:
        body = json.loads(raw)
    except RecursionError:
        return too_deep_answer
    except ValueError:
        return 400, "The body must be JSON."
    if too_deep(body, MAX_DEPTH):
        return too_deep_answer
    if not isinstance(body, dict):
        return 400, "The body must be a JSON object."
    return body


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
        if cross_origin(request, site_url):
            return error(403, "Cross-origin feedback is not allowed.")
        actor = actor_of(await maybe_await(authenticate(request)))
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
                entry = validate_feedback(await maybe_await(enrich_entry(entry, {"actor": actor, "request": request})))
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
                await maybe_await(telemetry(entry))
            except Exception:
                logger.exception("Feedback telemetry failed for request %s", entry.request_id)
        return JSONResponse({"ok": True, "request_id": entry.request_id})

    return endpoint
