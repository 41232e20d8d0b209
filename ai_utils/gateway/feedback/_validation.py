"""Feedback rows: `FeedbackEntry` and `validate_feedback` (snake_case or the seed's camelCase keys)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from ai_utils.exceptions import AiUtilsError

__all__ = ["MAX_COMMENT_LENGTH", "FeedbackEntry", "FeedbackValidationError", "validate_feedback"]

MAX_COMMENT_LENGTH = 4000
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
