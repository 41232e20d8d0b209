"""Pure parts of `FakeJevServer`: request checks like the real API, and answers computed like Jev's.

Confidence formulas are TypeSafe's reference adapter's, which match the hosted API on recorded replies
(reference §3): choice ``(p_max - 1/K) / (1 - 1/K)``; score ``max(0, 1 - sum(p_i * |i - mode|) / MAD_uniform)``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["RULE_KEYS", "RuleError", "check_body", "choice_answer", "dumps", "error", "noul_answer", "score_answer"]

_OPENROUTER_KEYS = frozenset({"model", "state", "questions", "session_id", "user", "trace", "provider"})
_TYPESAFE_KEYS = frozenset({"model", "state", "questions", "assets"})
RULE_KEYS = {"choice": {"choice", "probabilities", "confidence"}, "noul": {"noul"}, "score": {"score", "probabilities"}}


class RuleError(Exception):
    """A test's answer rule does not fit the question it was asked for."""


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def error(dialect: str, status: int, message: str) -> tuple[int, bytes, dict[str, str]]:
    if dialect == "typesafe":
        body: dict[str, Any] = {"detail": [{"loc": ["body"], "msg": message, "type": "value_error"}]}
        status = 422 if status == 400 else status
    else:
        body = {"error": {"code": status, "message": message}}
    return status, dumps(body), {"Content-Type": "application/json"}


def check_body(body: dict[str, Any], dialect: str, *, alias: bool) -> tuple[int, str] | None:
    allowed = _TYPESAFE_KEYS if dialect == "typesafe" else _OPENROUTER_KEYS
    unknown = sorted(set(body) - allowed)
    if unknown:
        return 400, f"Unrecognized key(s) in object: {', '.join(map(repr, unknown))}"
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return 400, "`model` is required"
    if dialect == "typesafe" or (alias and model.startswith("jev-")):
        if not model.startswith("jev-"):
            return 400, f"Unknown model: {model}"
    elif not model.startswith(("~typesafe/", "typesafe/")):
        return 400, f"{model} is not a decisions model"
    if "state" not in body or not isinstance(body["state"], str | dict | list):
        return 400, "`state` must be a string, object or array"
    questions = body.get("questions")
    if not isinstance(questions, dict) or not questions:
        return 400, "`questions` must be an object with at least one question"
    for name, question in questions.items():
        problem = _check_question(question, dialect)
        if problem is not None:
            return 400, f"questions.{name}: {problem}"
    return None


def _check_question(question: Any, dialect: str) -> str | None:
    if not isinstance(question, dict):
        return "must be an object"
    kind = question.get("type")
    if kind == "box":
        return "box questions need an image in `state`"
    if kind not in ("choice", "noul", "score"):
        return f"unknown type {kind!r}"
    unknown = set(question) - {"type", "instructions", "criteria"}
    if unknown:
        return f"unrecognized keys {sorted(unknown)!r}"
    instructions = question.get("instructions")
    if not (isinstance(instructions, str) and instructions) and not (
        isinstance(instructions, dict | list) and instructions
    ):
        return "`instructions` is required"
    criteria = question.get("criteria")
    if kind == "choice":
        if not isinstance(criteria, dict) or not 1 <= len(criteria) <= 255:
            return "`criteria` must be an object with 1 to 255 labels"
    elif kind == "score":
        if not isinstance(criteria, list) or not 2 <= len(criteria) <= 10 or any(c is None for c in criteria):
            return "`criteria` must be an array of 2 to 10 levels (no nulls)"
    elif criteria is not None:
        if not isinstance(criteria, dict) or set(criteria) - {"true", "false"} or not criteria:
            return "`criteria` must be an object with `true` and `false`"
        if dialect == "openrouter" and set(criteria) != {"true", "false"}:
            return "`criteria` needs both `true` and `false`"
    return None


def choice_answer(name: str, labels: list[str], rule: Mapping[str, Any]) -> dict[str, Any]:
    if "probabilities" in rule:
        given = {str(label): float(p) for label, p in rule["probabilities"].items()}
        stray = set(given) - set(labels)
        if stray:
            raise RuleError(
                f"choice {name!r}: probabilities for unknown labels {sorted(stray)!r}; labels are {labels!r}"
            )
        probabilities = {label: round(given.get(label, 0.0), 2) for label in labels}
    else:
        picked = rule.get("choice", labels[0])
        if picked not in labels:
            raise RuleError(f"choice {name!r}: {picked!r} is not one of {labels!r}")
        rest = round(0.1 / (len(labels) - 1), 2) if len(labels) > 1 else 0.0
        probabilities = {label: (1.0 if len(labels) == 1 else 0.9) if label == picked else rest for label in labels}
    chosen = rule.get("choice") or max(labels, key=lambda label: probabilities[label])
    if chosen not in labels:
        raise RuleError(f"choice {name!r}: {chosen!r} is not one of {labels!r}")
    k = len(labels)
    p_max = max(probabilities.values())
    confidence = 1.0 if k == 1 else max(0.0, (p_max - 1 / k) / (1 - 1 / k))
    confidence = float(rule.get("confidence", confidence))
    return {"type": "choice", "choice": chosen, "probabilities": probabilities, "confidence": round(confidence, 2)}


def noul_answer(name: str, rule: Mapping[str, Any]) -> dict[str, Any]:
    """A noul answer: the rule's P(yes), default 0.1."""
    value = float(rule.get("noul", 0.1))
    if not 0 <= value <= 1:
        raise RuleError(f"noul {name!r}: {value!r} is not between 0 and 1")
    return {"type": "noul", "noul": round(value, 2)}


def score_answer(name: str, levels: list[Any], rule: Mapping[str, Any]) -> dict[str, Any]:
    n = len(levels)
    if "probabilities" in rule:
        given = {int(level): float(p) for level, p in rule["probabilities"].items()}
        if set(given) - set(range(n)):
            raise RuleError(f"score {name!r}: probabilities for levels {sorted(given)!r}; levels are 0..{n - 1}")
        dist = [given.get(level, 0.0) for level in range(n)]
    elif "score" in rule:
        value = float(rule["score"])
        if not 0 <= value <= n - 1:
            raise RuleError(f"score {name!r}: {value!r} is not between 0 and {n - 1}")
        low = math.floor(value)
        dist = [0.0] * n
        dist[low] = 1 - (value - low)
        if value > low:
            dist[low + 1] = value - low
    else:
        dist = [0.9, 0.1] + [0.0] * (n - 2)
    dist = [round(p, 2) for p in dist]
    mode = max(range(n), key=lambda level: dist[level])
    spread = sum(abs(level - (n - 1) / 2) for level in range(n)) / n
    confidence = max(0.0, 1 - sum(p * abs(level - mode) for level, p in enumerate(dist)) / spread)
    return {
        "type": "score",
        "score": round(sum(level * p for level, p in enumerate(dist)), 2),
        "legend": {str(level): text for level, text in enumerate(levels)},
        "probabilities": {str(level): p for level, p in enumerate(dist)},
        "confidence": round(confidence, 2),
    }
