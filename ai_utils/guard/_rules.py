"""Types of the guardrail engine and the ``custom`` pack's literal content rules (validated once, matched per text).

Rules hold literal strings only: no user regexes (a pattern would be a denial-of-service and bypass surface). The
literals are matched case-insensitively through one ``re.escape``-d alternation per rule, which is linear in the
text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, get_args

from typing_extensions import TypedDict

from ai_utils.exceptions import UserError

__all__ = [
    "PHASES",
    "RISKS",
    "Action",
    "ContentRule",
    "GuardMode",
    "GuardrailDecision",
    "OnDecision",
    "Phase",
    "PolicyPack",
    "Risk",
    "Rule",
    "StreamingMode",
    "compile_rules",
]

Phase = Literal["input", "context", "tool_input", "tool_output", "output"]
"""Where a policy looks: the user's messages, other messages the model reads (system/injected context), a tool
call's arguments, a tool's result (retrieved context), and the model's answer."""
PHASES: tuple[str, ...] = get_args(Phase)
Action = Literal["redact", "block", "truncate", "require_approval", "approved", "edited", "rejected", "audit"]
Risk = Literal["low", "medium", "high", "critical"]
RISKS: tuple[str, ...] = get_args(Risk)
PolicyPack = Literal["standard", "strict", "custom"]
StreamingMode = Literal["audit", "buffer"]
GuardMode = Literal["enforce", "audit"]
"""``"enforce"``: decisions act; ``"audit"``: every decision is made and reported, nothing is changed."""

# A tool result is retrieved context too: a rule for "context" also covers tool results; the seed's
# "model.preflight" (everything the model is about to read) is accepted as a shorthand.
_PHASE_ALIASES: Mapping[str, tuple[str, ...]] = {
    "context": ("context", "tool_output"),
    "model.preflight": ("input", "context", "tool_output"),
}
_MAX_LITERALS = 100
_MAX_LITERAL_CHARS = 1_000
_KEYS = frozenset({"id", "phases", "action", "contains_any", "replacement", "risk"})


class GuardrailDecision(TypedDict):
    """One policy decision: what acted, where and how; never the content it acted on."""

    policy_id: str
    phase: Phase
    action: Action
    risk: Risk
    tool: NotRequired[str]
    reason: NotRequired[str]
    """Why a policy failed (``"timeout"``, ``"error"``, ``"malformed"``) or a scan stopped (``"scan_limit"``)."""


OnDecision = Callable[[GuardrailDecision], Any]


class ContentRule(TypedDict):
    """A ``custom`` pack rule: act on text that contains any of the literal strings."""

    id: str
    phases: Sequence[str]
    action: Literal["redact", "block"]
    contains_any: Sequence[str]
    replacement: NotRequired[str]
    risk: NotRequired[Risk]


@dataclass(frozen=True, slots=True)
class Rule:
    """A validated content rule."""

    id: str
    phases: frozenset[str]
    action: Literal["redact", "block"]
    literals: tuple[str, ...]
    replacement: str
    risk: Risk
    pattern: re.Pattern[str]

    def apply(self, text: str) -> tuple[str, bool]:
        """``(text after the rule, whether it matched)``; a block replaces the whole text."""
        if self.action == "block":
            return (self.replacement, True) if self.pattern.search(text) else (text, False)
        new, count = self.pattern.subn(lambda _m: self.replacement, text)
        return new, bool(count)


def _fail(index: int, problem: str) -> UserError:
    return UserError(
        f"content_rules[{index}]: {problem}. A rule is "
        '{"id": "support.private", "phases": ["input", "output"], "action": "redact", '
        '"contains_any": ["private marker"], "replacement": "[PRIVATE]"}.'
    )


def _phases(index: int, value: object) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise _fail(index, f"'phases' must be a non-empty list of {list(PHASES)!r}, got {value!r}")
    out: set[str] = set()
    for phase in value:
        if phase in _PHASE_ALIASES:
            out.update(_PHASE_ALIASES[phase])
        elif phase in PHASES:
            out.add(phase)
        else:
            raise _fail(index, f"unknown phase {phase!r}; use {list(PHASES)!r}")
    return frozenset(out)


def _literals(index: int, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise _fail(index, f"'contains_any' must be a non-empty list of literal strings, got {value!r}")
    if len(value) > _MAX_LITERALS:
        raise _fail(index, f"'contains_any' has {len(value)} strings; at most {_MAX_LITERALS} are allowed")
    for literal in value:
        if not isinstance(literal, str) or not literal.strip() or len(literal) > _MAX_LITERAL_CHARS:
            raise _fail(
                index, f"each 'contains_any' entry must be a non-blank string of at most {_MAX_LITERAL_CHARS} chars"
            )
    return tuple(value)


def _rule(index: int, raw: object) -> Rule:
    if not isinstance(raw, Mapping):
        raise _fail(index, f"a rule must be a mapping, got {raw!r}")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        if {"pattern", "regex", "patterns"} & set(unknown):
            raise _fail(index, "regular expressions are not accepted; list literal strings in 'contains_any'")
        raise _fail(index, f"unknown keys {unknown!r}; allowed keys are {sorted(_KEYS)!r}")
    rule_id = raw.get("id")
    if not isinstance(rule_id, str) or not rule_id.strip():
        raise _fail(index, f"'id' must be a non-empty string, got {rule_id!r}")
    action = raw.get("action")
    if action not in ("redact", "block"):
        raise _fail(index, f"'action' must be 'redact' or 'block', got {action!r}")
    risk = raw.get("risk", "medium")
    if risk not in RISKS:
        raise _fail(index, f"'risk' must be one of {list(RISKS)!r}, got {risk!r}")
    literals = _literals(index, raw.get("contains_any"))
    default = f"[REDACTED:{rule_id}]" if action == "redact" else f"[BLOCKED:{rule_id}]"
    replacement = raw.get("replacement", default)
    if not isinstance(replacement, str):
        raise _fail(index, f"'replacement' must be a string, got {replacement!r}")
    # Longest first, so a literal that contains another is replaced whole.
    alternation = "|".join(re.escape(s) for s in sorted(literals, key=len, reverse=True))
    return Rule(
        id=rule_id,
        phases=_phases(index, raw.get("phases")),
        action=action,
        literals=literals,
        replacement=replacement,
        risk=risk,
        pattern=re.compile(alternation, re.IGNORECASE),
    )


def compile_rules(rules: Sequence[ContentRule] | Sequence[Mapping[str, Any]]) -> tuple[Rule, ...]:
    """Validate the ``custom`` pack's rules.

    Raises:
        UserError: naming the rule index and what to fix (unknown keys, regexes, bad phases, duplicate ids).
    """
    if isinstance(rules, str | bytes | Mapping) or not isinstance(rules, Sequence):
        raise UserError(f"content_rules must be a list of rule mappings, got {rules!r}.")
    out = tuple(_rule(i, raw) for i, raw in enumerate(rules))
    ids = [r.id for r in out]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise UserError(f"content_rules ids must be unique; repeated: {duplicates!r}. Rename the rules.")
    return out
