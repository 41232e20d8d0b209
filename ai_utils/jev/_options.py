"""Keyword options a sync/async twin pair declares once: ``**options: Unpack[SomeTypedDict]`` (PEP 692).

Type checkers see every keyword with its type (and suggest the right one for a typo). At run time Python no
longer checks the keyword names, so `check_options` does what it would have done.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["check_options"]


def check_options(entry: str, options: Mapping[str, Any], declared: type) -> None:
    """Raise Python's own `TypeError` for a keyword ``declared`` (a TypedDict) lacks, or a required one missing.

    Args:
        entry: the function's name, for the message (``"invoke"``).
        options: the ``**options`` the function received.
        declared: the TypedDict of its keywords.
    """
    required: frozenset[str] = getattr(declared, "__required_keys__", frozenset())
    known = required | getattr(declared, "__optional_keys__", frozenset())
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"{entry}() got an unexpected keyword argument {unknown[0]!r}")
    missing = sorted(required - set(options))
    if missing:
        names = " and ".join(repr(name) for name in missing)
        raise TypeError(f"{entry}() missing {len(missing)} required keyword-only argument(s): {names}")
