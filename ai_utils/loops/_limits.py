"""The size and depth limits of a loop definition and of the data a run carries, checked without recursion.

A definition built in code and one loaded from JSON go through the same builders and therefore the same
limits; `Loop.from_json` first walks the whole JSON value here (iteratively, so a value nested a million
levels deep is measured, not recursed into) and refuses anything too big, too deep or not JSON before a
builder sees it. Everything after that check may recurse: depth is bounded by `MAX_DEPTH`.

Why limits at all: the CEL library is native code whose parser panics (pyo3's ``PanicException``, a
``BaseException``) or overflows the stack on very long expressions, Python recursion ends at about 1,000
levels, and a definition from outside must never take a server down.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = [
    "MAX_ARGV",
    "MAX_CONTEXT_DEPTH",
    "MAX_DEFINITION_CHARS",
    "MAX_DEFINITION_NODES",
    "MAX_DEPTH",
    "MAX_EXPRESSION_CHARS",
    "MAX_HOOKS",
    "MAX_NAME_CHARS",
    "MAX_PERMISSIONS",
    "MAX_STEPS",
    "MAX_TEXT_CHARS",
    "MAX_TRANSITIONS",
    "data_problem",
]

MAX_DEFINITION_CHARS = 1 << 20
"""JSON text of a definition: at most 1 MiB."""
MAX_DEFINITION_NODES = 50_000
"""Values (objects, lists, strings, numbers, ...) in one definition."""
MAX_DEPTH = 32
"""Nesting of a definition (and of a step's ``input``, the ``result`` or an ``output`` schema in it)."""
MAX_TEXT_CHARS = 64 * 1024
"""One string (a prompt, a message, a schema description)."""
MAX_NAME_CHARS = 200
"""A loop name, step key, tool name, rule id, label or context path."""
MAX_EXPRESSION_CHARS = 1024
"""A ``when`` expression. The CEL parser crashes the process on long member chains (~16,000 characters)."""
MAX_STEPS = 256
MAX_TRANSITIONS = 64
MAX_PERMISSIONS = 512
MAX_HOOKS = 32
"""Hooks per hook event."""
MAX_ARGV = 256
"""Arguments of one ``command_hook``."""
MAX_CONTEXT_DEPTH = 64
"""Nesting of the run's context data (caller input, step and hook results): CEL converts it natively."""


def data_problem(
    value: object,
    *,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_DEFINITION_NODES,
    max_text: int = MAX_TEXT_CHARS,
    allow_tuples: bool = True,
) -> str | None:
    """Why ``value`` is not bounded JSON data (objects with str keys, lists, str, finite numbers, bool, None).

    Walks iteratively: a value nested deeper than ``max_depth`` is refused at that depth, never recursed into.

    Args:
        value: the value to check.
        max_depth: the deepest nesting allowed (a scalar at the top is depth 0).
        max_nodes: the most values in all.
        max_text: the longest string (keys included).
        allow_tuples: accept tuples as lists (values built in code).

    Returns:
        A short reason naming where (``$.steps.a.input``), or ``None`` when the value is fine.
    """
    lists = (list, tuple) if allow_tuples else (list,)
    stack: list[tuple[object, int, str]] = [(value, 0, "$")]
    nodes = 0
    while stack:
        item, depth, where = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return f"more than {max_nodes} values"
        if not isinstance(item, Mapping) and not isinstance(item, lists):
            problem = _scalar_problem(item, where, max_text)
            if problem is not None:
                return problem
            continue
        if depth >= max_depth:
            return f"nesting deeper than {max_depth} levels at {where}"
        if isinstance(item, Mapping):
            for key, child in item.items():
                if not isinstance(key, str):
                    return f"a non-string key {type(key).__name__} at {where}"
                if len(key) > max_text:
                    return f"a key of {len(key)} characters at {where} (limit {max_text})"
                stack.append((child, depth + 1, f"{where}.{key[:40]}"))
        else:
            for index, child in enumerate(item):
                stack.append((child, depth + 1, f"{where}[{index}]"))
    return None


def _scalar_problem(item: object, where: str, max_text: int) -> str | None:
    if item is None or isinstance(item, bool):
        return None
    if isinstance(item, str):
        return f"a string of {len(item)} characters at {where} (limit {max_text})" if len(item) > max_text else None
    if isinstance(item, int):
        return None if -(1 << 63) <= item < (1 << 64) else f"an integer beyond 64 bits at {where}"
    if isinstance(item, float):
        return None if math.isfinite(item) else f"a non-finite number at {where}"
    return f"a {type(item).__name__} at {where} (only JSON data is allowed)"
