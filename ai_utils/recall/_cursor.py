"""Opaque, filter-bound page cursors for `MemoryItemStore.list_page`.

A cursor names a keyset position ``(created_at, id)`` and the filter it was made for (namespace and scope, as a
digest). It is validated whole: the text shape, the JSON shape, every field's type and range, its checksum, and
that its filter is the one of the call it is handed to (a cursor from another namespace or scope is a
`UserError`, never a page of something else). A cursor grants nothing: the scope always comes from the call.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass

from ai_utils.exceptions import UserError
from ai_utils.recall._items import ITEM_ID, MemoryScope

__all__ = ["Position", "decode_cursor", "encode_cursor", "filter_digest"]

_SHAPE = re.compile(r"[A-Za-z0-9_-]{16,512}")
_MAX_POSITION = 2**63 - 1
_VERSION = 1


@dataclass(frozen=True, slots=True)
class Position:
    """A keyset position: the created time in microseconds and the item id."""

    created: int
    id: str


def filter_digest(root: str, scope: MemoryScope) -> str:
    """The digest of what a page lists (namespace root and scope) that a cursor is bound to."""
    raw = json.dumps(["list_page", root, scope.kind, scope.subject_id], ensure_ascii=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def _checksum(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def encode_cursor(position: Position, digest: str) -> str:
    """The opaque cursor text for ``position`` under the filter ``digest``."""
    body = json.dumps({"v": _VERSION, "f": digest, "c": position.created, "i": position.id}, separators=(",", ":"))
    payload = json.dumps({"b": body, "h": _checksum(body)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def _invalid(cursor: object, why: str) -> UserError:
    shown = cursor if not isinstance(cursor, str) or len(cursor) <= 80 else cursor[:80] + "..."
    return UserError(
        f"Invalid memory cursor {shown!r}: {why}. Pass the `next_cursor` that list_page returned for the same "
        "namespace and scope, or None for the first page."
    )


def decode_cursor(cursor: object, digest: str) -> Position:
    """The position ``cursor`` names, after checking it whole and against the call's filter ``digest``.

    Raises:
        UserError: anything but a cursor `encode_cursor` made for this filter.
    """
    if not isinstance(cursor, str) or not _SHAPE.fullmatch(cursor):
        raise _invalid(cursor, "not a cursor string")
    try:
        payload = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        body = payload["b"]
        if set(payload) != {"b", "h"} or not isinstance(body, str) or payload["h"] != _checksum(body):
            raise ValueError("checksum")
        fields = json.loads(body)
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError, KeyError):
        raise _invalid(cursor, "it is damaged or was not made by list_page") from None
    if not isinstance(fields, dict) or set(fields) != {"v", "f", "c", "i"} or fields["v"] != _VERSION:
        raise _invalid(cursor, "unknown cursor version")
    created, item_id = fields["c"], fields["i"]
    if type(created) is not int or not 0 <= created <= _MAX_POSITION:
        raise _invalid(cursor, "its position is not a non-negative 63-bit integer")
    if not isinstance(item_id, str) or not ITEM_ID.fullmatch(item_id):
        raise _invalid(cursor, "its item id is malformed")
    if fields["f"] != digest:
        raise _invalid(cursor, "it belongs to another namespace or scope")
    return Position(created, item_id)
