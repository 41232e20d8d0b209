"""`KeywordModeRouter` (seed: agent-core-toolloop "KeywordModeRouter"): route a message to a mode.

Each mode has its own tool set, skills and iteration limit; rules match keywords, with priorities and
exclusion patterns.

Keywords match whole words, case-insensitively, after English Snowball stemming (the ``snowballstemmer``
package, as Sphinx's search uses), so ``"assessment"`` matches "assess", "Assessments" and "assessing" but
never "reassess"; a phrase such as ``"kill myself"`` matches those words in a row. Stemming is what makes the
seed's own example work: "Can you assess my symptoms?" routes to the rule whose keyword is "assessment".
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from typing_extensions import TypedDict

from ai_utils.exceptions import UserError

__all__ = ["KeywordModeRouter", "KeywordRule", "ModeDecision", "ModeDefinition", "ModeRouter"]

_WORD = re.compile(r"\w+")
_CAMEL = {
    "allowedTools": "allowed_tools",
    "activeSkills": "active_skills",
    "maxToolIterations": "max_tool_iterations",
    "retrievalBudget": "retrieval_budget",
}
_DEFINITION_KEYS = frozenset({"mode", "allowed_tools", "active_skills", "max_tool_iterations", "retrieval_budget"})
_RULE_KEYS = frozenset({"keywords", "mode", "definition", "exclude", "priority"})
_CACHE_SIZE = 1024


def _names(value: Any, what: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise UserError(f"{what} must be a list of names, got {value!r}; e.g. {what}=['lookup_medication'].")
    names = list(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise UserError(f"{what} holds {name!r}; every entry must be a non-empty str.")
    return names


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{what} must be a non-negative int, got {value!r}.")
    return value


@dataclass(frozen=True)
class ModeDefinition:
    """One mode: the tools the model may call in it, its skills and its limits.

    Attributes:
        mode: the mode's name, e.g. ``"assessment"``.
        allowed_tools: the only tools the model sees (and may call) in this mode; ``[]`` for none.
        active_skills: skill names for this mode (metadata for your prompt assembly).
        max_tool_iterations: at most this many tool rounds per turn; then the model must answer.
        retrieval_budget: how many retrieved snippets this mode may use (metadata for your retrieval).
    """

    mode: str
    allowed_tools: list[str]
    active_skills: list[str] = field(default_factory=list)
    max_tool_iterations: int = 5
    retrieval_budget: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.mode, str) or not self.mode:
            raise UserError(f"ModeDefinition.mode must be a non-empty str, got {self.mode!r}.")
        object.__setattr__(self, "allowed_tools", _names(self.allowed_tools, "allowed_tools"))
        object.__setattr__(self, "active_skills", _names(self.active_skills, "active_skills"))
        _count(self.max_tool_iterations, "max_tool_iterations")
        _count(self.retrieval_budget, "retrieval_budget")


@dataclass(frozen=True)
class ModeDecision:
    """The mode a message was routed to.

    Attributes:
        mode: the mode's name.
        allowed_tools: the tools the model may call.
        active_skills: the mode's skills.
        max_tool_iterations: the tool-round limit per turn.
        retrieval_budget: the mode's retrieval budget.
        matched_rule: the index of the rule that matched (in the order given), ``None`` for the default mode.
    """

    mode: str
    allowed_tools: list[str]
    active_skills: list[str]
    max_tool_iterations: int
    retrieval_budget: int
    matched_rule: int | None = None


class KeywordRule(TypedDict, total=False):
    """One routing rule of `KeywordModeRouter`.

    Attributes:
        keywords: words or phrases; any one of them selects the rule.
        mode: the mode's name.
        definition: the mode: a `ModeDefinition` or a mapping of its fields (``allowed_tools``, ...).
        exclude: regular expressions (case-insensitive); when one matches the message the rule is skipped.
        priority: higher first (default 0); equal priorities keep their order.
    """

    keywords: Sequence[str]
    mode: str
    definition: ModeDefinition | Mapping[str, Any]
    exclude: Sequence[str | re.Pattern[str]]
    priority: int


@runtime_checkable
class ModeRouter(Protocol):
    """What ``Agent(modes=...)`` accepts: anything that routes a message to a `ModeDecision`."""

    def resolve(self, message: Any, history: Sequence[Any] = ()) -> ModeDecision:
        """Route ``message`` (with earlier ``history``) to a mode."""
        ...


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=8192)
def _stem(word: str) -> str:
    stem: str = _stemmer().stemWord(word)
    return stem


def _stems(text: str) -> str:
    """The text's word stems, space-separated with a space at both ends (so `` <phrase> `` is a word match)."""
    return " " + " ".join(_stem(w) for w in _WORD.findall(text.lower())) + " "


def _definition(raw: Any, mode: str | None, where: str) -> ModeDefinition:
    if isinstance(raw, ModeDefinition):
        if mode is not None and raw.mode != mode:
            raise UserError(f"{where}: mode {mode!r} differs from its definition's mode {raw.mode!r}; use one name.")
        return raw
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: `definition` must be a ModeDefinition or a mapping, got {raw!r}.")
    fields: dict[str, Any] = {_CAMEL.get(str(k), str(k)): v for k, v in raw.items()}
    unknown = sorted(set(fields) - _DEFINITION_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown definition keys {unknown!r}; use {sorted(_DEFINITION_KEYS)!r}.")
    if mode is not None:
        if fields.setdefault("mode", mode) != mode:
            raise UserError(f"{where}: mode {mode!r} differs from its definition's mode {fields['mode']!r}.")
    if "allowed_tools" not in fields:
        raise UserError(f"{where}: the definition needs `allowed_tools` (use [] for a mode without tools).")
    return ModeDefinition(**fields)


@dataclass(frozen=True)
class _Rule:
    index: int
    priority: int
    phrases: tuple[str, ...]
    exclude: tuple[re.Pattern[str], ...]
    definition: ModeDefinition
    decision: ModeDecision


def _pattern(raw: Any, where: str) -> re.Pattern[str]:
    if isinstance(raw, re.Pattern):
        return raw
    if not isinstance(raw, str):
        raise UserError(f"{where}: an exclude pattern must be a regex str, got {raw!r}.")
    try:
        return re.compile(raw, re.IGNORECASE)
    except re.error as err:
        raise UserError(
            f"{where}: the exclude pattern {raw!r} is not a valid regex ({err}). Fix or escape it."
        ) from err


def _decision(definition: ModeDefinition, matched_rule: int | None) -> ModeDecision:
    return ModeDecision(
        mode=definition.mode,
        allowed_tools=list(definition.allowed_tools),
        active_skills=list(definition.active_skills),
        max_tool_iterations=definition.max_tool_iterations,
        retrieval_budget=definition.retrieval_budget,
        matched_rule=matched_rule,
    )


def _rule(index: int, raw: Any) -> _Rule:
    where = f"rules[{index}]"
    if not isinstance(raw, Mapping):
        raise UserError(f"{where} must be a mapping with 'keywords', 'mode' and 'definition', got {raw!r}.")
    unknown = sorted(set(raw) - _RULE_KEYS)
    if unknown:
        raise UserError(f"{where} has unknown keys {unknown!r}; use {sorted(_RULE_KEYS)!r}.")
    if "definition" not in raw:
        raise UserError(f"{where} needs a `definition` (the mode's allowed_tools, ...).")
    keywords = _names(raw.get("keywords", ()), f"{where}.keywords")
    phrases = tuple(_stems(k) for k in keywords)
    empty = [k for k, p in zip(keywords, phrases, strict=True) if not p.strip()]
    if not keywords or empty:
        raise UserError(f"{where} needs keywords made of words, got {keywords!r}.")
    exclude = raw.get("exclude", ())
    if isinstance(exclude, (str, re.Pattern)):
        exclude = [exclude]
    patterns = tuple(_pattern(p, where) for p in exclude)
    priority = raw.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise UserError(f"{where}.priority must be an int, got {priority!r}.")
    definition = _definition(raw["definition"], raw.get("mode"), where)
    return _Rule(index, priority, phrases, patterns, definition, _decision(definition, index))


def _text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        content = item.get("content")
        return content if isinstance(content, str) else ""
    text = getattr(item, "text", "")
    return text if isinstance(text, str) else ""


def _is_user(item: Any) -> bool:
    if isinstance(item, Mapping):
        return item.get("role") in ("user", "human")
    return getattr(item, "type", None) == "human" or isinstance(item, str)


class KeywordModeRouter:
    """Route each message to a mode by keywords; the first matching rule wins, else the default mode.

    Example:
        ```python
        router = KeywordModeRouter(
            default_mode=ModeDefinition(mode="general", allowed_tools=["greet_user"]),
            rules=[{"keywords": ["diagnose", "assessment"], "mode": "assessment",
                    "definition": {"allowed_tools": ["lookup_medication"], "max_tool_iterations": 8},
                    "exclude": [r"what is"]}],
        )
        router.resolve("Can you assess my symptoms?").mode   # "assessment"
        agent = Agent(llm=..., tools=[...], modes=router)    # per-turn tool sets
        ```

    Args:
        default_mode: the mode when no rule matches (a `ModeDefinition` or a mapping of its fields).
        rules: `KeywordRule` mappings, tried by ``priority`` (higher first), then in the order given.
        history_scan_depth: how many of the latest user messages in ``history`` are searched for keywords too
            (exclude patterns look at the message only).

    Raises:
        UserError: a rule without keywords or definition, an unknown key, or an exclude pattern that is not a
            valid regex.
    """

    def __init__(
        self,
        *,
        default_mode: ModeDefinition | Mapping[str, Any],
        rules: Sequence[KeywordRule | Mapping[str, Any]] = (),
        history_scan_depth: int = 3,
    ) -> None:
        self.default_mode = _definition(default_mode, None, "default_mode")
        self.history_scan_depth = _count(history_scan_depth, "history_scan_depth")
        if isinstance(rules, Mapping) or not isinstance(rules, Iterable):
            raise UserError(f"`rules` must be a list of rule mappings, got {rules!r}.")
        compiled = [_rule(i, raw) for i, raw in enumerate(rules)]
        self._rules = sorted(compiled, key=lambda r: -r.priority)
        self._default = _decision(self.default_mode, None)
        self._cache: dict[str, ModeDecision] = {}

    @property
    def modes(self) -> list[ModeDefinition]:
        """Every mode the router can pick: the default first, then each rule's, in the order given."""
        by_index = sorted(self._rules, key=lambda r: r.index)
        return [self.default_mode, *(r.definition for r in by_index)]

    def resolve(self, message: Any, history: Sequence[Any] = ()) -> ModeDecision:
        """Route ``message`` to a mode.

        Args:
            message: the user's message (a str, a LangChain message, or the seed's ``{"message", "history"}``).
            history: earlier messages (mappings with ``role``/``content`` or LangChain messages); the latest
                ``history_scan_depth`` user messages are searched for keywords too.

        Returns:
            The `ModeDecision` (``matched_rule`` is the rule's index, ``None`` for the default mode).
        """
        decision = self._route(message, history)
        # A copy: the caller may change its lists without changing what the router answers next time.
        return dataclasses.replace(
            decision, allowed_tools=list(decision.allowed_tools), active_skills=list(decision.active_skills)
        )

    def _route(self, message: Any, history: Sequence[Any] = ()) -> ModeDecision:
        """`resolve` without the defensive copy: the router's own cached decision, for callers that never change it."""
        if type(message) is not str and isinstance(message, Mapping):
            history = message.get("history") or history
            message = message.get("message", "")
        text = _text(message)
        recent = (
            [_text(h) for h in history if _is_user(h)][-self.history_scan_depth :] if self.history_scan_depth else []
        )
        decision = self._cache.get(text) if not recent else None
        if decision is None:
            decision = self._match(text, " ".join(recent))
            if not recent:
                if len(self._cache) >= _CACHE_SIZE:
                    self._cache.clear()
                self._cache[text] = decision
        return decision

    def _match(self, text: str, context: str) -> ModeDecision:
        stems = _stems(f"{text} {context}" if context else text)
        for rule in self._rules:
            if not any(phrase in stems for phrase in rule.phrases):
                continue
            if any(p.search(text) for p in rule.exclude):
                continue
            return rule.decision
        return self._default

    def __repr__(self) -> str:
        modes = ", ".join(repr(m.mode) for m in self.modes)
        return f"KeywordModeRouter(modes=[{modes}])"
