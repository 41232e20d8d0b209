"""Pure checks that turn one question (dict or `langchain_core.decisions` model) into its wire dict.

Limits and rules come from `reference/jev-protocol.md` §2 and §4: `instructions` is always sent
(OpenRouter answers 400 without it), a choice has 1..255 labels, a score 2..10 levels that are not
null, and on OpenRouter a noul's criteria name both `true` and `false` (TypeSafe accepts one).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ai_utils.exceptions import UserError

__all__ = [
    "MAX_CHOICE_OPTIONS",
    "MAX_SCORE_LEVELS",
    "MIN_SCORE_LEVELS",
    "Provider",
    "QuestionSpec",
    "check_choice_criteria",
    "check_instructions",
    "check_noul_criteria",
    "check_score_criteria",
    "safe_label_keys",
    "wire_question",
]

Provider = Literal["openrouter", "typesafe"]

MAX_CHOICE_OPTIONS = 255
MIN_SCORE_LEVELS = 2
MAX_SCORE_LEVELS = 10
_KINDS = ("choice", "noul", "score")
_QUESTION_KEYS = frozenset({"type", "instructions", "criteria"})
_JSON_TYPES = (str, int, float, bool, type(None), Mapping, list, tuple)
# Keys a JavaScript server mangles: numeric-looking keys get reordered, `__proto__`-style names collide with
# object internals (composio-typesafe `keys.py`). Such labels travel under a generated safe key.
_JS_PROTOTYPE_NAMES = frozenset(
    {
        "constructor",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
        "__proto__",
    }
)
_NUMERIC = re.compile(r"^-?\d+(\.\d+)?$")
_SLUG = re.compile(r"[^A-Za-z0-9]+")


def wire_question(name: str, question: Any, *, provider: Provider = "openrouter") -> dict[str, Any]:
    """Check one question and return the dict sent on the wire.

    Args:
        name: the question id (used in error messages).
        question: a dict ``{"type", "instructions", "criteria"}`` or a `langchain_core.decisions`
            ``Choice``/``Noul``/``Score``.
        provider: ``"openrouter"`` enforces OpenRouter's stricter noul criteria rule.

    Returns:
        A new dict with ``type``, ``instructions`` and (when given) ``criteria``.

    Raises:
        UserError: when the question is not a valid Jev question, naming what is wrong.
    """
    raw = _as_mapping(name, question)
    unknown = set(raw) - _QUESTION_KEYS
    if unknown:
        raise UserError(
            f"Question {name!r} has unknown keys {sorted(unknown)!r}. "
            "A question has only `type`, `instructions` and `criteria`."
        )
    kind = raw.get("type")
    if kind == "box":
        raise UserError(
            f"Question {name!r} is a `box` question, which classify() does not support. Use choice, noul or score."
        )
    if kind not in _KINDS:
        raise UserError(f"Question {name!r} has type {kind!r}. Use one of 'choice', 'noul', 'score'.")
    wire: dict[str, Any] = {"type": kind, "instructions": check_instructions(name, raw.get("instructions"))}
    criteria = raw.get("criteria")
    if kind == "choice":
        wire["criteria"] = check_choice_criteria(name, criteria)
    elif kind == "score":
        wire["criteria"] = check_score_criteria(name, criteria)
    elif criteria is not None:
        wire["criteria"] = check_noul_criteria(name, criteria, provider=provider)
    return wire


class QuestionSpec:
    """Base of the question objects `choice()`/`noul()`/`score()` return; they turn into a question dict."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        """Return the question as an (unchecked) ``{"type", "instructions", "criteria"}`` dict."""
        raise NotImplementedError


def _as_mapping(name: str, question: Any) -> Mapping[str, Any]:
    if isinstance(question, Mapping):
        return question
    if isinstance(question, QuestionSpec):
        return question.as_dict()
    types = sys.modules.get("langchain_core.decisions.types")
    if types is not None and isinstance(question, types.Choice | types.Noul | types.Score | types.Box):
        dumped: dict[str, Any] = question.model_dump()
        criteria = dumped.get("criteria")
        if dumped["type"] == "noul" and isinstance(criteria, Mapping):
            # NoulCriteria() leaves unset sides as None: drop them so "no criteria" stays "no criteria".
            kept = {side: text for side, text in criteria.items() if text is not None}
            dumped["criteria"] = kept or None
        return dumped
    raise UserError(
        f"Question {name!r} is a {type(question).__name__}, not a question. Pass a dict like "
        '{"type": "noul", "instructions": "..."} or a langchain_core.decisions Choice/Noul/Score.'
    )


def check_instructions(name: str, instructions: Any) -> Any:
    """Return ``instructions`` when it is a non-blank string or a JSON object/array, else raise `UserError`."""
    if isinstance(instructions, str):
        if instructions.strip():
            return instructions
    elif isinstance(instructions, Mapping | list | tuple) and instructions:
        return _plain_json(instructions)
    raise UserError(
        f"Question {name!r} needs `instructions` (a non-empty string or JSON object), got {instructions!r}. "
        "Jev never sees the question id, so say the whole question there."
    )


def check_choice_criteria(name: str, criteria: Any) -> dict[str, Any]:
    """Return a choice's ``{label: description}`` criteria, checked (1..255 string labels, JSON descriptions)."""
    if not isinstance(criteria, Mapping):
        raise UserError(
            f"Choice {name!r} needs `criteria` as a dict of label -> description (or None), got {criteria!r}. "
            'Use e.g. {"billing": "Payments or refunds", "other": None}.'
        )
    if not criteria:
        raise UserError(f"Choice {name!r} has no labels. Give at least one label in `criteria`.")
    if len(criteria) > MAX_CHOICE_OPTIONS:
        raise UserError(
            f"Choice {name!r} has {len(criteria)} labels; Jev allows at most {MAX_CHOICE_OPTIONS}. "
            "Split it into several questions or group the labels."
        )
    for label, description in criteria.items():
        if not isinstance(label, str):
            raise UserError(f"Choice {name!r} has the label {label!r}; labels must be strings.")
        _check_json(name, f"the description of {label!r}", description)
    return {label: _plain_json(description) for label, description in criteria.items()}


def check_score_criteria(name: str, criteria: Any) -> list[Any]:
    """Return a score's ordered levels, checked (a list of 2..10 descriptions, none of them None)."""
    if isinstance(criteria, str | bytes | Mapping) or not isinstance(criteria, Sequence):
        raise UserError(
            f"Score {name!r} needs `criteria` as a list of level descriptions, lowest first, got {criteria!r}. "
            'Use e.g. ["Can wait", "Time-sensitive", "Blocking"].'
        )
    if not MIN_SCORE_LEVELS <= len(criteria) <= MAX_SCORE_LEVELS:
        raise UserError(
            f"Score {name!r} has {len(criteria)} levels; Jev needs {MIN_SCORE_LEVELS} to {MAX_SCORE_LEVELS}. "
            "Add or merge levels."
        )
    for level, description in enumerate(criteria):
        if description is None:
            raise UserError(f"Score {name!r} level {level} is None. Describe every level (a string or JSON object).")
        _check_json(name, f"level {level}", description)
    return [_plain_json(description) for description in criteria]


def check_noul_criteria(name: str, criteria: Any, *, provider: Provider = "openrouter") -> dict[str, Any]:
    """Return a noul's ``{"true": ..., "false": ...}`` criteria, checked (OpenRouter needs both sides)."""
    if not isinstance(criteria, Mapping):
        raise UserError(
            f"Noul {name!r} has `criteria` {criteria!r}; use a dict with both 'true' and 'false' "
            "descriptions, or leave `criteria` out."
        )
    extra = set(criteria) - {"true", "false"}
    present = {side for side in ("true", "false") if criteria.get(side) is not None}
    if extra or not present or (provider == "openrouter" and len(present) < 2):
        raise UserError(
            f"Noul {name!r} has criteria keys {sorted(map(str, criteria))!r}; Jev needs both 'true' and 'false' "
            "(and nothing else). Describe both outcomes, or leave `criteria` out."
        )
    for side in present:
        _check_json(name, f"the {side!r} criterion", criteria[side])
    return {side: _plain_json(criteria[side]) for side in ("true", "false") if side in present}


def _check_json(name: str, what: str, value: Any) -> None:
    if not isinstance(value, _JSON_TYPES):
        raise UserError(
            f"Question {name!r}: {what} is a {type(value).__name__}. Use a string, a JSON object or array, or None."
        )


def _plain_json(value: Any) -> Any:
    """Copy mappings/tuples into plain dicts/lists so the wire dict does not alias the caller's objects."""
    if isinstance(value, Mapping):
        return {key: _plain_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_json(item) for item in value]
    return value


def safe_label_keys(labels: Sequence[str]) -> dict[str, str] | None:
    """Map labels a JavaScript server would mangle to generated keys; ``None`` when every label is safe.

    Returns:
        ``{wire_key: label}`` for every label (safe ones map to themselves), or ``None``.
    """
    if not any(_unsafe(label) for label in labels):
        return None
    mapping: dict[str, str] = {}
    for index, label in enumerate(labels):
        key = label
        if _unsafe(label):
            slug = _SLUG.sub("_", label).strip("_")[:24]
            key = f"o{index}_{slug}" if slug else f"o{index}"
            while key in labels or key in mapping:
                key += "_"
        mapping[key] = label
    return mapping


def _unsafe(label: str) -> bool:
    return (
        not label
        or label != label.strip()
        or label.startswith("__")
        or label in _JS_PROTOTYPE_NAMES
        or _NUMERIC.match(label) is not None
    )
