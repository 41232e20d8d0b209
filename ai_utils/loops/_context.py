"""The loop context: reading ``ctx`` paths, writing step results, projecting the result.

Bindings, never interpolation: only an exact ``{"$context": path}`` object is replaced by the value at
``path``; every other value, strings included, passes through unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ai_utils.exceptions import LoopError
from ai_utils.loops._limits import MAX_CONTEXT_DEPTH
from ai_utils.loops._steps import BINDING_KEY, is_binding

__all__ = ["LoopResult", "jsonable", "project", "read_path", "resolve", "write_path"]

_MISSING = object()


def read_path(context: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path``, or the ``_MISSING`` sentinel."""
    value: Any = context
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def resolve(value: Any, context: Mapping[str, Any], *, step_key: str | None, absent_roots: Collection[str] = ()) -> Any:
    """``value`` with every binding replaced by its context value (recursively).

    Args:
        value: a JSON-like tree that may contain ``{"$context": path}`` bindings.
        context: the loop context.
        step_key: the step resolving (for the error message).
        absent_roots: roots that may be missing (steps a branch did not run); their paths resolve to ``None``.

    Raises:
        LoopError: a path that is not in the context.
    """
    if is_binding(value):
        path: str = value[BINDING_KEY]
        found = read_path(context, path)
        if found is _MISSING:
            if path.split(".", 1)[0] in absent_roots:
                return None
            where = f"step {step_key!r}" if step_key else "the loop result"
            raise LoopError(
                f"ctx({path!r}) in {where} is not in the loop context (roots: {sorted(context)!r}). "
                "Seed it in the run input or let an earlier step produce it.",
                step_key=step_key,
                path=path,
            )
        return found
    if isinstance(value, Mapping):
        return {k: resolve(v, context, step_key=step_key, absent_roots=absent_roots) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [resolve(v, context, step_key=step_key, absent_roots=absent_roots) for v in value]
    return value


def write_path(context: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``context`` with ``value`` at dotted ``path`` (intermediate mappings are created)."""
    head, _, rest = path.partition(".")
    out = dict(context)
    if not rest:
        out[head] = value
        return out
    inner = out.get(head)
    out[head] = write_path(inner if isinstance(inner, Mapping) else {}, rest, value)
    return out


def jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` as JSON data for the context (checkpointed, and the input of CEL expressions).

    Raises:
        ValueError: ``value`` is nested deeper than `MAX_CONTEXT_DEPTH` levels (CEL converts the context natively,
            and Python recursion ends at about 1,000 levels).
    """
    if _depth > MAX_CONTEXT_DEPTH:
        raise ValueError(f"nested deeper than {MAX_CONTEXT_DEPTH} levels")
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, _depth + 1) for v in value]
    try:
        return jsonable(json.loads(json.dumps(value)), _depth)
    except (TypeError, ValueError, RecursionError):
        return str(value)


@dataclass(frozen=True, slots=True)
class LoopResult:
    """What a completed loop run returns.

    Attributes:
        data: the projected ``result["data"]`` (``None`` without a ``result``).
        presentation: the projected ``result["presentation"]`` (text, actions), or ``None``.
        context: the final loop context.
        thread_id: the run's thread.
        run_id: the run's id (as in `LoopRunner.runs`).
        follow_ups: the answers to follow-ups (`LoopRunner.steer` with ``follow_up=True``), in order.
    """

    data: Any
    presentation: Any
    context: dict[str, Any]
    thread_id: str | None = None
    run_id: str | None = None
    follow_ups: tuple[Any, ...] = ()


def _check_urls(presentation: Any) -> None:
    actions = presentation.get("actions") if isinstance(presentation, Mapping) else None
    for index, action in enumerate(actions or ()):
        if isinstance(action, Mapping) and action.get("type") == "open_url":
            url = action.get("url")
            if not isinstance(url, str) or not url.lower().startswith("https://"):
                # The scheme only: a resolved URL may carry tokens in its query.
                shown = url.split(":", 1)[0] + ":" if isinstance(url, str) and ":" in url else type(url).__name__
                raise LoopError(
                    f"result.presentation.actions[{index}] (open_url) resolved to a {shown!r} URL; only https:// "
                    "URLs are allowed. Make the step that produces it return an https URL."
                )


def project(
    result: Mapping[str, Any] | None, context: Mapping[str, Any], *, absent_roots: Collection[str]
) -> dict[str, Any]:
    """Resolve the loop's ``result`` over the final context: ``{"data": ..., "presentation": ...}``.

    Raises:
        LoopError: a missing path (other than a step this run did not take) or an unsafe ``open_url``.
    """
    if result is None:
        return {"data": None, "presentation": None}
    data = resolve(result.get("data"), context, step_key=None, absent_roots=absent_roots)
    presentation = resolve(result.get("presentation"), context, step_key=None, absent_roots=absent_roots)
    _check_urls(presentation)
    return {"data": data, "presentation": presentation}
