"""Stable request hashes and audit-sized summaries."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Set
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel

from ai_utils._json import RawJSON, fast_json

__all__ = ["hash_canonical", "truncate_for_audit"]

_ELLIPSIS = "…"


def _default(value: Any) -> Any:
    if isinstance(value, RawJSON):  # only on the stdlib path: orjson embeds the text as is
        return json.loads(value.text)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Set):
        return sorted(value, key=repr)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)


# Sorted keys, no whitespace, non-ASCII kept: built once (``json.dumps`` would build an encoder per call) and
# run through orjson, since it serializes every audited call's messages on the call's path.
_canonical_json = fast_json(
    json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_default).encode,
    default=_default,
    sort_keys=True,
)


def hash_canonical(value: Any) -> str:
    """Hash any value stably: canonical JSON (sorted keys, no whitespace), then SHA-256.

    Equal values give equal hashes regardless of key order, so identical requests can be found in the audit log.

    Args:
        value: JSON-like data; pydantic models, dataclasses, sets, datetimes and bytes are converted first.

    Returns:
        The 64-character hex digest.
    """
    return hashlib.sha256(_canonical_json(value).encode("utf-8")).hexdigest()


def truncate_for_audit(value: Any, max_length: int = 1500) -> str:
    """Render a value for an audit row, cut to at most ``max_length`` characters.

    Strings are kept as they are, anything else becomes JSON. A cut text ends with ``"…"``.

    Args:
        value: the value to summarize.
        max_length: the hard upper bound on the result length.

    Returns:
        The text, never longer than ``max_length`` (empty when ``max_length <= 0``).
    """
    text = value if isinstance(value, str) else _canonical_json(value)
    if len(text) <= max_length:
        return text
    if max_length <= 0:
        return ""
    return text[: max_length - 1] + _ELLIPSIS
