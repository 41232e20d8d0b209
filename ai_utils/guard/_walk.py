"""The scan bounds of nested values (tool arguments, structured answers): checked first, so no scan stops silently.

Every walk over a nested value (the private-network check, content rules, secret redaction of structured answers) is
recursive and complete. Before any of them runs, `check_bounds` measures the value once, without recursion: a value
deeper than `MAX_DEPTH`, with more than `MAX_ITEMS` items or `MAX_CHARS` characters of text raises `ScanLimitError`,
and the caller decides (blocked under ``strict``, untrusted under ``standard``) instead of passing it unscanned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MAX_CHARS", "MAX_DEPTH", "MAX_ITEMS", "ScanLimitError", "check_bounds"]

MAX_DEPTH: Final = 64
"""Nesting levels of a scanned value (tool arguments from a model are a few levels deep)."""
MAX_ITEMS: Final = 100_000
"""Containers, keys and leaves of a scanned value."""
MAX_CHARS: Final = 4_000_000
"""Characters of text (keys and string leaves) in a scanned value."""


class ScanLimitError(Exception):
    """A value past the scan bounds; ``reason`` says which (never the value)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_bounds(value: Any) -> None:
    """Raise `ScanLimitError` when ``value`` is too deep or too large to scan whole; cost O(items), no recursion.

    Raises:
        ScanLimitError: naming the bound (``depth``, ``items`` or ``size``).
    """
    if isinstance(value, Mapping) and len(value) <= 256 and all(map(_flat, value.values())):
        return  # the common case: a few scalar arguments (keys count too, but a few hundred are nothing)
    stack: list[tuple[Any, int]] = [(value, 0)]
    items = 0
    chars = 0
    while stack:
        item, depth = stack.pop()
        items += 1
        if items > MAX_ITEMS:
            raise ScanLimitError(f"more than {MAX_ITEMS} items")
        if isinstance(item, str):
            chars += len(item)
            if chars > MAX_CHARS:
                raise ScanLimitError(f"more than {MAX_CHARS} characters")
            continue
        if isinstance(item, Mapping):
            children: Any = [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple | set | frozenset):
            children = item
        else:
            continue
        if depth >= MAX_DEPTH:
            raise ScanLimitError(f"nested deeper than {MAX_DEPTH} levels")
        if items + len(stack) + len(children) > MAX_ITEMS:
            raise ScanLimitError(f"more than {MAX_ITEMS} items")
        stack.extend((child, depth + 1) for child in children)


def _flat(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 100_000)
