"""`resolve_model_route` (seed: polpo-core "Model routing"): pick a model profile per request.

Order: an explicit ``{"profile": name}`` input skips all automation; with ``mode="pinned"`` the configured
profile (``fallback``) is used as it is; then ordered rules on trusted ``labels``, the runtime ``surface`` and the
``invocation_source`` (first match wins); then the classifier picks among the allowed profiles by their hints. A
classifier timeout, error, malformed or unknown answer, or a confidence below ``min_confidence`` gives the
configured ``fallback`` — never an exception to the caller, never a raw model id. Cancellation still propagates.
Every route carries its secret-free audit fields (`ModelRoute.audit`) for the gateway's audit row.

The classifier sees only the request text and the allowed profile names with their hints: never profile
definitions or model ids, history, tool schemas, labels or credentials. The default is `jev_route_classifier`:
one `classify()` choice question (Jev), bounded and calibrated.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from typing_extensions import TypedDict

from ai_utils.exceptions import ModelProfileError, UserError
from ai_utils.routing._route_classifiers import (
    DecisionModelClassifier,
    JevRouteClassifier,
    RouteClassifier,
    choice_of,
    jev_route_classifier,
)
from ai_utils.routing.profiles import ModelProfiles, as_profiles

__all__ = [
    "JevRouteClassifier",
    "ModelRoute",
    "RouteMode",
    "RouteRule",
    "aresolve_model_route",
    "jev_route_classifier",
    "resolve_model_route",
]

RouteReason: TypeAlias = Literal["explicit", "pinned", "rule", "classifier", "fallback"]
RouteMode: TypeAlias = Literal["pinned", "auto"]
"""``"auto"``: rules, then the classifier, pick the profile; ``"pinned"``: the configured profile (``fallback``) is
used as it is (an explicit ``{"profile": ...}`` request still wins)."""

_MAX_NAME: Final = 64  # surface / invocation source names


@dataclass(frozen=True)
class ModelRoute:
    """Where a request goes.

    Attributes:
        profile: the selected profile (always one of ``allowed``).
        models: its concrete model ids, primary first (pass ``profile`` to ``get_llm(profile=..., profiles=...)``).
        reason: ``"explicit"`` (the input named an allowed profile), ``"pinned"`` (``mode="pinned"``: the configured
            profile), ``"rule"`` (a rule matched), ``"classifier"`` (the classifier chose with enough confidence)
            or ``"fallback"``.
        confidence: the classifier's confidence when it answered (also when too low), else ``None``.
        rule: the id of the rule that matched (``reason="rule"``).
        mode: the routing mode the route was resolved in.
        surface: the runtime surface the request came through (as given).
        invocation_source: what invoked the request (as given).
        fallback_used: the classifier was asked and the fallback was used instead (failure, unknown answer, low
            confidence) — not set for a fallback chosen because routing had nothing to decide (not compared by ``==``).
        latency_ms: how long resolving took (not compared by ``==``).
    """

    profile: str
    models: list[str]
    reason: RouteReason
    confidence: float | None = None
    rule: str | None = None
    mode: RouteMode = "auto"
    surface: str | None = None
    invocation_source: str | None = None
    # How it went, not where it goes: left out of ``==`` (two routes to the same place compare equal).
    fallback_used: bool = field(default=False, compare=False)
    latency_ms: float = field(default=0.0, compare=False)

    @property
    def audit(self) -> dict[str, Any]:
        """The route's audit fields, secret-free (never the request text, labels, hints or credentials).

        Put them in the gateway's audit row with the call's metadata: ``gateway.llm(feature,
        metadata={"model_route": route.audit})`` or ``gateway.callback(feature, metadata=...)``.
        """
        return {
            "profile": self.profile,
            "models": list(self.models),
            "reason": self.reason,
            "mode": self.mode,
            "rule": self.rule,
            "confidence": self.confidence,
            "surface": self.surface,
            "invocation_source": self.invocation_source,
            "fallback_used": self.fallback_used,
            "latency_ms": round(self.latency_ms, 3),
        }


class RouteRule(TypedDict, total=False):
    """A deterministic routing rule on trusted request facts; every condition given must hold.

    Attributes:
        id: a name for audits (``ModelRoute.rule``).
        profile: the profile to select (must be allowed).
        when: ``{"all_labels": [...]}`` and/or ``{"any_labels": [...]}`` (camelCase ``allLabels``/``anyLabels``
            too), ``{"surfaces": [...]}`` (the request's ``surface`` is one of them; ``"surface": str`` for one)
            and ``{"invocation_sources": [...]}`` (``"invocation_source": str`` for one; camelCase
            ``invocationSources``/``invocationSource`` too).
    """

    id: str
    profile: str
    when: Mapping[str, Sequence[str] | str]


@dataclass(slots=True)
class _Plan:
    profiles: ModelProfiles
    allowed: tuple[str, ...]
    grant: tuple[str, ...] | None  # ``allowed`` narrowed by the profiles' own allowlist
    fallback: str
    min_confidence: float
    mode: RouteMode = "auto"
    facts: _Facts = field(default_factory=lambda: _Facts(frozenset(), None, None))
    started: float = field(default_factory=time.perf_counter)


def _labels(when: Mapping[str, Any], snake: str, camel: str) -> frozenset[str] | None:
    value = when.get(snake)
    if value is None:
        value = when.get(camel)
        if value is None:
            return None
    if type(value) not in (list, tuple, frozenset, set) and (isinstance(value, str) or not isinstance(value, Sequence)):
        raise UserError(f"Rule labels under {snake!r} must be a list of strs, got {value!r}.")
    return frozenset(value)


def _names(when: Mapping[str, Any], keys: tuple[str, ...], what: str) -> frozenset[str] | None:
    """A rule's accepted surfaces or invocation sources (a str or a list of strs under any of ``keys``)."""
    value = next((when[k] for k in keys if when.get(k) is not None), None)
    if value is None:
        return None
    values = [value] if isinstance(value, str) else value
    if type(values) not in (list, tuple, frozenset, set) or not values or not all(isinstance(v, str) for v in values):
        raise UserError(f"Rule {what} under {keys[0]!r} must be a str or a non-empty list of strs, got {value!r}.")
    return frozenset(values)


_SURFACE_KEYS = ("surfaces", "surface")
_SOURCE_KEYS = ("invocation_sources", "invocation_source", "invocationSources", "invocationSource")


@dataclass(frozen=True, slots=True)
class _Facts:
    """What rules match on: the request's trusted labels, surface and invocation source."""

    labels: frozenset[str]
    surface: str | None
    invocation_source: str | None


def _rule_matches(rule: Mapping[str, Any], facts: _Facts, allowed: tuple[str, ...], index: int) -> bool:
    profile = rule.get("profile")
    if not isinstance(profile, str) or profile not in allowed:
        raise ModelProfileError(
            f"Route rule {rule.get('id', index)!r} selects {profile!r}, which is not in allowed {list(allowed)!r}. "
            "Rules can only pick allowed profiles.",
            profile=str(profile),
        )
    when = rule.get("when") or {}
    if type(when) is not dict and not isinstance(when, Mapping):
        raise UserError(f"Route rule {rule.get('id', index)!r}: `when` must be a mapping, got {when!r}.")
    all_labels = _labels(when, "all_labels", "allLabels")
    any_labels = _labels(when, "any_labels", "anyLabels")
    surfaces = _names(when, _SURFACE_KEYS, "surfaces")
    sources = _names(when, _SOURCE_KEYS, "invocation sources")
    if all_labels is None and any_labels is None and surfaces is None and sources is None:
        raise UserError(
            f"Route rule {rule.get('id', index)!r} has no condition; give when={{'all_labels': [...]}}, "
            "{'any_labels': [...]}, {'surfaces': [...]} or {'invocation_sources': [...]}."
        )
    if all_labels is not None and not all_labels <= facts.labels:
        return False
    if any_labels is not None and not any_labels & facts.labels:
        return False
    if surfaces is not None and facts.surface not in surfaces:
        return False
    return sources is None or facts.invocation_source in sources


def _route(
    plan: _Plan,
    profile: str,
    reason: RouteReason,
    confidence: float | None = None,
    rule: Any = None,
    *,
    fallback_used: bool = False,
) -> ModelRoute:
    models = plan.profiles._models(profile, plan.grant)
    return ModelRoute(
        profile,
        models,
        reason,
        confidence,
        None if rule is None else str(rule),
        mode=plan.mode,
        surface=plan.facts.surface,
        invocation_source=plan.facts.invocation_source,
        fallback_used=fallback_used,
        latency_ms=(time.perf_counter() - plan.started) * 1000,
    )


def _name(value: object, what: str) -> str | None:
    """A surface or invocation source name, validated whole."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > _MAX_NAME or not value.isprintable():
        raise UserError(
            f"`{what}` must be a short name like 'agent', 'channel' or 'webhook' (1-{_MAX_NAME} printable "
            f"characters), got {value!r}."
        )
    return value


def _prepare(
    input: Any,
    profiles: ModelProfiles | Mapping[str, Any],
    allowed: Sequence[str],
    rules: Sequence[RouteRule | Mapping[str, Any]],
    fallback: str,
    labels: Sequence[str],
    min_confidence: float,
    classifier: RouteClassifier | None,
    surface: str | None = None,
    invocation_source: str | None = None,
    mode: RouteMode = "auto",
) -> ModelRoute | _Question:
    """The final route, or the question for the classifier (arguments checked either way)."""
    started = time.perf_counter()
    if mode not in ("pinned", "auto"):
        raise UserError(f"`mode` must be 'pinned' or 'auto', got {mode!r}.")
    facts = _Facts(frozenset(labels), _name(surface, "surface"), _name(invocation_source, "invocation_source"))
    table = as_profiles(profiles)
    if isinstance(allowed, str) or not allowed:
        raise UserError(f"`allowed` must be a non-empty list of profile names, got {allowed!r}.")
    grant = tuple(allowed)
    narrowed = table._grant(grant)  # raises ModelProfileError naming an unknown profile (checked once per list)
    if fallback not in grant:
        raise ModelProfileError(
            f"The fallback profile {fallback!r} is not in allowed {list(grant)!r}; add it or pick an allowed one.",
            profile=str(fallback),
        )
    if type(min_confidence) not in (float, int) or not 0 <= min_confidence <= 1:
        raise UserError(f"min_confidence must be a number in 0..1, got {min_confidence!r}.")
    plan = _Plan(table, grant, narrowed, fallback, float(min_confidence), mode, facts, started)
    if type(input) is not str and isinstance(input, Mapping):
        if set(input) == {"profile"}:
            profile = input["profile"]
            if profile not in grant:
                raise ModelProfileError(
                    f"The requested profile {profile!r} is not in allowed {list(grant)!r}.", profile=str(profile)
                )
            return _route(plan, profile, "explicit")
        raise UserError(f"`input` must be the request text or {{'profile': name}}, got {input!r}.")
    if input is not None and not isinstance(input, str):
        raise UserError(f"`input` must be the request text or {{'profile': name}}, got {input!r}.")
    if mode == "pinned":
        return _route(plan, fallback, "pinned")
    for index, rule in enumerate(rules):
        if _rule_matches(rule, facts, grant, index):
            return _route(plan, rule["profile"], "rule", rule=rule.get("id", index))
    if len(grant) == 1 or not (input or "").strip():
        return _route(plan, fallback, "fallback")
    return _Question(plan, input or "", _classifier(classifier))


@dataclass(frozen=True)
class _Question:
    """What the classifier is asked: the request ``text`` and the allowed profiles' hints."""

    plan: _Plan
    text: str
    ask: Any  # ``__call__(text, choices)``, maybe ``acall`` (see `_classifier`)

    @property
    def choices(self) -> dict[str, str | None]:
        return {name: self.plan.profiles.hint(name) for name in self.plan.allowed}

    def fallback(self, confidence: float | None = None) -> ModelRoute:
        return _route(self.plan, self.plan.fallback, "fallback", confidence, fallback_used=True)

    def finish(self, answer: Any) -> ModelRoute:
        """The classifier's answer as a route; anything malformed, unknown or unsure is the fallback."""
        try:
            profile, confidence = choice_of(answer)
        except (TypeError, ValueError, KeyError, AttributeError):
            return self.fallback()
        if not isinstance(profile, str) or profile not in self.plan.allowed or not 0 <= confidence <= 1:
            return self.fallback()
        if confidence < self.plan.min_confidence:
            return self.fallback(confidence)
        return _route(self.plan, profile, "classifier", confidence)


def _classifier(classifier: Any) -> Any:
    """``classifier`` as something with ``__call__(text, choices)`` (and, for the async twin, maybe ``acall``)."""
    if classifier is None:
        return JevRouteClassifier()
    if isinstance(classifier, JevRouteClassifier):
        return classifier
    from langchain_core.decisions import BaseDecisionModel
    from langchain_core.language_models import BaseChatModel

    if isinstance(classifier, BaseDecisionModel):
        return DecisionModelClassifier(classifier)
    if isinstance(classifier, BaseChatModel):
        return JevRouteClassifier(llm=classifier)
    if not callable(classifier):
        raise UserError(
            f"`classifier` must be a function (text, choices) -> (profile, confidence), a decision model or a chat "
            f"model, got {classifier!r}."
        )
    return classifier


def resolve_model_route(
    input: str | Mapping[str, str] | None,
    *,
    profiles: ModelProfiles | Mapping[str, Any],
    allowed: Sequence[str],
    rules: Sequence[RouteRule | Mapping[str, Any]] = (),
    fallback: str,
    labels: Sequence[str] = (),
    classifier: RouteClassifier | None = None,
    min_confidence: float = 0.6,
    surface: str | None = None,
    invocation_source: str | None = None,
    mode: RouteMode = "auto",
) -> ModelRoute:
    """Pick the model profile for one request.

    Example:
        ```python
        free_users = {"id": "free-users", "profile": "fast", "when": {"all_labels": ["tier:free"]}}
        route = resolve_model_route("Summarize this short update.", profiles=profiles, allowed=["fast", "balanced"],
                                    rules=[free_users], fallback="balanced", labels=["tier:pro"])
        llm = get_llm(profile=route.profile, profiles=profiles)
        ```

        Rules can also match where the request came from, and the route goes into the gateway's audit row:

        ```python
        channels = {"id": "channels-fast", "profile": "fast", "when": {"surfaces": ["channel", "webhook"]}}
        route = resolve_model_route(text, profiles=profiles, allowed=["fast", "balanced"], rules=[channels],
                                    fallback="balanced", surface="webhook", invocation_source="request")
        llm = gateway.llm("support", metadata={"model_route": route.audit})
        ```

    Args:
        input: the request text, or ``{"profile": name}`` to select an allowed profile explicitly.
        profiles: the `ModelProfiles` (pass the same object every time: its resolution is cached).
        allowed: the profiles this request may use; rules and the classifier only pick among them.
        rules: `RouteRule`s on ``labels``, tried in order before any classifier.
        fallback: the profile when nothing else decides or the classifier fails (must be allowed).
        labels: trusted labels of the request (e.g. ``"tier:free"``), set by your server, never by the user.
        classifier: default `jev_route_classifier()` (Jev); or a decision model, a chat model (label logprobs) or a
            function ``(text, {profile: hint}) -> (profile, confidence)`` (see `RouteClassifier`).
        min_confidence: a classifier answer below this confidence gives the fallback.
        surface: the runtime surface the request came through (the seed's ``"agent"``, ``"task"``,
            ``"channel"``, ``"webhook"``, or your own), set by your server; rules may match on it.
        invocation_source: what invoked it (the seed's ``"request"``, ``"channel"``, ``"task"``, ``"schedule"``,
            ``"loop-step"``, ``"internal"``, or your own), set by your server; rules may match on it.
        mode: ``"auto"`` (default: rules, then the classifier) or ``"pinned"`` (the ``fallback`` profile, no
            routing; an explicit ``{"profile": ...}`` input still wins).

    Returns:
        The `ModelRoute`.

    Raises:
        ModelProfileError: an unknown profile, an explicit/rule/fallback profile outside ``allowed``, or a profile
            that cannot be resolved (configuration errors fail closed; classifier failures never raise).
        UserError: malformed arguments.
    """
    question = _prepare(
        input, profiles, allowed, rules, fallback, labels, min_confidence, classifier, surface, invocation_source, mode
    )
    if isinstance(question, ModelRoute):
        return question
    try:
        answer: Any = question.ask(question.text, question.choices)
        if inspect.isawaitable(answer):
            if inspect.iscoroutine(answer):
                answer.close()
            raise TypeError("an async classifier needs aresolve_model_route")
    except Exception:
        return question.fallback()
    return question.finish(answer)


async def aresolve_model_route(
    input: str | Mapping[str, str] | None,
    *,
    profiles: ModelProfiles | Mapping[str, Any],
    allowed: Sequence[str],
    rules: Sequence[RouteRule | Mapping[str, Any]] = (),
    fallback: str,
    labels: Sequence[str] = (),
    classifier: RouteClassifier | None = None,
    min_confidence: float = 0.6,
    timeout: float | None = None,
    surface: str | None = None,
    invocation_source: str | None = None,
    mode: RouteMode = "auto",
) -> ModelRoute:
    """Async twin of `resolve_model_route`; ``classifier`` may be sync or async.

    Args:
        input: as for `resolve_model_route`.
        profiles: as for `resolve_model_route`.
        allowed: as for `resolve_model_route`.
        rules: as for `resolve_model_route`.
        fallback: as for `resolve_model_route`.
        labels: as for `resolve_model_route`.
        classifier: as for `resolve_model_route`; an async callable is awaited.
        min_confidence: as for `resolve_model_route`.
        timeout: seconds the classifier may take (a timeout gives the fallback); ``None`` leaves it to the classifier.
        surface: as for `resolve_model_route`.
        invocation_source: as for `resolve_model_route`.
        mode: as for `resolve_model_route`.

    Returns:
        The `ModelRoute`. Cancelling the caller cancels the classifier and raises; it never falls back.
    """
    question = _prepare(
        input, profiles, allowed, rules, fallback, labels, min_confidence, classifier, surface, invocation_source, mode
    )
    if isinstance(question, ModelRoute):
        return question
    call = getattr(question.ask, "acall", question.ask)
    try:
        async with asyncio.timeout(timeout):
            answer: Any = call(question.text, question.choices)
            if inspect.isawaitable(answer):
                answer = await answer
    except Exception:
        return question.fallback()
    return question.finish(answer)
