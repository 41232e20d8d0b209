"""Human feedback (1–5 ratings) tied to a gateway request id: validation, sinks and an ASGI route.

```python
from starlette.applications import Starlette
from starlette.routing import Route

from ai_utils.gateway.feedback import SqliteFeedbackSink, create_feedback_route

async def authenticate(request):
    user = await my_session_user(request)
    return {"actor": {"user_id": user.id, "tenant_id": user.org}} if user else None

endpoint = create_feedback_route(authenticate=authenticate, sink=SqliteFeedbackSink("audit.db"))
app = Starlette(routes=[Route("/api/feedback", endpoint, methods=["POST"])])
```

The client POSTs ``{"request_id": ..., "score": 1-5, "comment"?, "tags"?, "metadata"?}``; the user id always comes
from ``authenticate``, never from the body. Rows share ``request_id`` with the audit log, so they join on it.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from ai_utils._optional import missing_extra
from ai_utils.exceptions import AiUtilsError
from ai_utils.gateway.actor import Actor, to_actor
from ai_utils.gateway.audit import sql_table_name

__all__ = [
    "FeedbackEntry",
    "FeedbackSink",
    "FeedbackValidationError",
    "MemoryFeedbackSink",
    "NoopFeedbackSink",
    "SqliteFeedbackSink",
    "create_feedback_route",
    "validate_feedback",
]

logger = logging.getLogger("ai_utils.gateway.feedback")

MAX_COMMENT_LENGTH = 4000
# The feedback route answers 413 past this body size and 400 past this nesting of lists/objects.
MAX_BODY_BYTES = 64 * 1024
MAX_DEPTH = 16
_KEYS = {
    "request_id": "request_id",
    "requestId": "request_id",
    "user_id": "user_id",
    "userId": "user_id",
    "score": "score",
    "tenant_id": "tenant_id",
    "tenantId": "tenant_id",
    "comment": "comment",
    "tags": "tags",
    "metadata": "metadata",
    "created_at": "created_at",
    "createdAt": "created_at",
}


class FeedbackValidationError(AiUtilsError, ValueError):
    """A feedback payload broke the contract (answer it with HTTP 400)."""


@dataclass(frozen=True, slots=True)
class FeedbackEntry:
    """One validated rating.

    Args:
        request_id: the gateway request id the feedback is about.
        user_id: the submitting user (from authentication).
        score: 1–5.
        tenant_id: multi-tenant scope.
        comment: up to 4000 characters.
        tags: free-form labels.
        metadata: product-specific context.
        created_at: ISO 8601 timestamp; sinks fill in the server time when missing.
    """

    request_id: str
    user_id: str
    score: int
    tenant_id: str | None = None
    comment: str | None = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the entry as a JSON-ready dict.

        Returns:
            Every field by name.
        """
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _text(payload: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = payload.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise FeedbackValidationError(f"{key} must be a non-empty string, got {value!r}. Send {key} as text.")
    return value


def validate_feedback(payload: Any) -> FeedbackEntry:
    """Check a feedback payload (snake_case or the seed's camelCase keys) and build the entry.

    Args:
        payload: the decoded JSON body plus the server-side ``user_id``.

    Returns:
        The `FeedbackEntry`.

    Raises:
        FeedbackValidationError: not an object, an unknown key, a missing ``request_id``/``user_id``, a score
            that is not an integer 1–5, a comment over 4000 characters, bad tags, metadata or ``created_at``.
    """
    if isinstance(payload, FeedbackEntry):
        payload = payload.to_dict()
    if not isinstance(payload, Mapping):
        raise FeedbackValidationError(f"Feedback must be a JSON object, got {payload!r}. Send {{'score': 5, ...}}.")
    data: dict[str, Any] = {}
    for key, value in payload.items():
        if key not in _KEYS:
            raise FeedbackValidationError(
                f"Unknown feedback field {key!r}. Allowed: {', '.join(sorted(set(_KEYS.values())))}."
            )
        data[_KEYS[key]] = value
    score = data.get("score")
    if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
        raise FeedbackValidationError(f"score must be an integer from 1 to 5, got {score!r}. Send e.g. 'score': 4.")
    comment = data.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise FeedbackValidationError(f"comment must be a string, got {type(comment).__name__}. Send text.")
    if comment is not None and len(comment) > MAX_COMMENT_LENGTH:
        raise FeedbackValidationError(
            f"comment has {len(comment)} characters; the limit is {MAX_COMMENT_LENGTH}. Shorten the comment."
        )
    tags = data.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise FeedbackValidationError(f"tags must be a list of strings, got {tags!r}. Send e.g. ['accurate'].")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise FeedbackValidationError(f"metadata must be an object, got {metadata!r}. Send a JSON object.")
    created_at = data.get("created_at")
    if created_at is not None:
        try:
            datetime.fromisoformat(str(created_at))
        except ValueError:
            raise FeedbackValidationError(
                f"created_at must be an ISO 8601 timestamp, got {created_at!r}. Send e.g. '2030-01-01T12:00:00Z'."
            ) from None
    return FeedbackEntry(
        request_id=_text(data, "request_id", required=True) or "",
        user_id=_text(data, "user_id", required=True) or "",
        score=score,
        tenant_id=_text(data, "tenant_id", required=False),
        comment=comment,
        tags=list(tags),
        metadata=dict(metadata),
        created_at=str(created_at) if created_at is not None else None,
    )


@runtime_checkable
class FeedbackSink(Protocol):
    """Where feedback goes: ``write(entry)``, optionally ``async awrite(entry)``."""

    def write(self, entry: FeedbackEntry) -> None:
        """Store one entry.

        Args:
            entry: the entry.
        """


def _stamped(entry: FeedbackEntry) -> FeedbackEntry:
    return entry if entry.created_at else replace(entry, created_at=datetime.now(UTC).isoformat())


class NoopFeedbackSink:
    """Validate and discard (persistence happens elsewhere)."""

    def write(self, entry: FeedbackEntry) -> None:
        """Discard the entry.

        Args:
            entry: the entry.
        """


class MemoryFeedbackSink:
    """Keep entries in ``.entries`` (tests)."""

    def __init__(self) -> None:
        self.entries: list[FeedbackEntry] = []

    def write(self, entry: FeedbackEntry) -> None:
        """Append the entry, stamped with the server time if it has none.

        Args:
            entry: the entry.
        """
        self.entries.append(_stamped(entry))


class SqliteFeedbackSink:
    """Store feedback in SQLite (WAL); use the audit database file to join rows on ``request_id``.

    Args:
        path: the database file or ``":memory:"``.
        table: the table name.
    """

    def __init__(self, path: str | os.PathLike[str], *, table: str = "llm_feedback") -> None:
        table = sql_table_name(table, what="Feedback", default="llm_feedback")
        self.table = table
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            f'CREATE TABLE IF NOT EXISTS "{table}" (id INTEGER PRIMARY KEY, request_id TEXT NOT NULL,'
            " user_id TEXT NOT NULL, score INTEGER NOT NULL, tenant_id TEXT, comment TEXT, tags TEXT,"
            " metadata TEXT, created_at TEXT NOT NULL)"
        )
        self._conn.execute(f'CREATE INDEX IF NOT EXISTS "{table}_request_idx" ON "{table}" (request_id)')

    def write(self, entry: FeedbackEntry) -> None:
        """Insert the entry.

        Args:
            entry: the entry.
        """
        entry = _stamped(entry)
        values = (
            entry.request_id,
            entry.user_id,
            entry.score,
            entry.tenant_id,
            entry.comment,
            json.dumps(entry.tags),
            json.dumps(entry.metadata, default=str),
            entry.created_at,
        )
        with self._lock:
            self._conn.execute(
                f'INSERT INTO "{self.table}" (request_id, user_id, score, tenant_id, comment, tags, metadata,'
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            )

    def read(self, *, request_id: str | None = None) -> list[FeedbackEntry]:
        """Read stored entries.

        Args:
            request_id: only feedback about this request.

        Returns:
            The entries, oldest first.
        """
        query = f'SELECT request_id, user_id, score, tenant_id, comment, tags, metadata, created_at FROM "{self.table}"'
        params: tuple[str, ...] = ()
        if request_id is not None:
            query, params = query + " WHERE request_id = ?", (request_id,)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY id", params).fetchall()
        return [
            FeedbackEntry(
                request_id=r[0],
                user_id=r[1],
                score=r[2],
                tenant_id=r[3],
                comment=r[4],
                tags=json.loads(r[5]),
                metadata=json.loads(r[6]),
                created_at=r[7],
            )
            for r in rows
        ]


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
