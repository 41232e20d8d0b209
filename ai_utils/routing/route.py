"""`resolve_model_route` (seed: polpo-core "Model routing"): pick a model profile per request.

Order: an explicit ``{"profile": name}`` input skips all automation; then rules on trusted ``labels`` (first
match wins); then the classifier picks among the allowed profiles by their hints. A classifier timeout,
error, malformed or unknown answer, or a confidence below ``min_confidence`` gives the configured
``fallback`` — never an exception to the caller, never a raw model id. Cancellation still propagates.

The classifier sees only the request text and the allowed profile names with their hints: never profile
definitions or model ids, history, tool schemas, labels or credentials. The default is `jev_route_classifier`:
one `classify()` choice question (Jev), bounded and calibrated.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from typing_extensions import TypedDict

from ai_utils.exceptions import ModelProfileError, UserError
from ai_utils.routing.profiles import ModelProfiles, as_profiles

__all__ = [
    "JevRouteClassifier",
    "ModelRoute",
    "RouteRule",
    "aresolve_model_route",
    "jev_route_classifier",
    "resolve_model_route",
]

RouteReason: TypeAlias = Literal["explicit", "rule", "classifier", "fallback"]
RouteChoice: TypeAlias = tuple[str, float]
"""What a classifier returns: ``(profile name, confidence in 0..1)``."""
RouteClassifier: TypeAlias = Any
"""What ``classifier=`` takes: a `JevRouteClassifier`; a LangChain decision model (``BaseDecisionModel``, e.g.
`JevDecisionModel`), asked one ``Choice``; a chat model, asked through ``classify(..., llm=model)`` (label
logprobs); or a function ``(text, {profile: hint | None}) -> (profile, confidence)``, sync or async (a
mapping or object with ``profile``/``choice`` and ``confidence`` works as the answer too)."""

_QUESTION = "profile"
_INSTRUCTIONS = (
    "Which model profile should handle the request in `input`? Pick the profile whose description fits the "
    "request best; prefer the cheaper profile when several fit."
)


@dataclass(frozen=True)
class ModelRoute:
    """Where a request goes.

    Attributes:
        profile: the selected profile (always one of ``allowed``).
        models: its concrete model ids, primary first (pass ``profile`` to ``get_llm(profile=..., profiles=...)``).
        reason: ``"explicit"`` (the input named an allowed profile), ``"rule"`` (a label rule matched),
            ``"classifier"`` (the classifier chose with enough confidence) or ``"fallback"``.
        confidence: the classifier's confidence when it answered (also when too low), else ``None``.
        rule: the id of the rule that matched (``reason="rule"``).
    """

    profile: str
    models: list[str]
    reason: RouteReason
    confidence: float | None = None
    rule: str | None = None


class RouteRule(TypedDict, total=False):
    """A deterministic routing rule on trusted labels.

    Attributes:
        id: a name for audits (``ModelRoute.rule``).
        profile: the profile to select (must be allowed).
        when: ``{"all_labels": [...]}`` and/or ``{"any_labels": [...]}`` (camelCase ``allLabels``/``anyLabels`` too).
    """

    id: str
    profile: str
    when: Mapping[str, Sequence[str]]


@dataclass(slots=True)
class _Plan:
    profiles: ModelProfiles
    allowed: tuple[str, ...]
    grant: tuple[str, ...] | None  # ``allowed`` narrowed by the profiles' own allowlist
    fallback: str
    min_confidence: float


def _labels(when: Mapping[str, Any], snake: str, camel: str) -> frozenset[str] | None:
    value = when.get(snake)
    if value is None:
        value = when.get(camel)
        if value is None:
            return None
    if type(value) not in (list, tuple, frozenset, set) and (isinstance(value, str) or not isinstance(value, Sequence)):
        raise UserError(f"Rule labels under {snake!r} must be a list of strs, got {value!r}.")
    return frozenset(value)


def _rule_matches(rule: Mapping[str, Any], labels: frozenset[str], allowed: tuple[str, ...], index: int) -> bool:
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
    if all_labels is None and any_labels is None:
        raise UserError(
            f"Route rule {rule.get('id', index)!r} has no condition; give when={{'all_labels': [...]}} "
            "or {'any_labels': [...]}."
        )
    if all_labels is not None and not all_labels <= labels:
        return False
    return any_labels is None or bool(any_labels & labels)


def _route(
    plan: _Plan, profile: str, reason: RouteReason, confidence: float | None = None, rule: Any = None
) -> ModelRoute:
    models = plan.profiles._models(profile, plan.grant)
    return ModelRoute(profile, models, reason, confidence, None if rule is None else str(rule))


def _prepare(
    input: Any,
    profiles: ModelProfiles | Mapping[str, Any],
    allowed: Sequence[str],
    rules: Sequence[RouteRule | Mapping[str, Any]],
    fallback: str,
    labels: Sequence[str],
    min_confidence: float,
) -> tuple[_Plan, ModelRoute | str]:
    """The checked plan and either the final route or the text the classifier must judge."""
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
    plan = _Plan(table, grant, narrowed, fallback, float(min_confidence))
    if type(input) is not str and isinstance(input, Mapping):
        if set(input) == {"profile"}:
            profile = input["profile"]
            if profile not in grant:
                raise ModelProfileError(
                    f"The requested profile {profile!r} is not in allowed {list(grant)!r}.", profile=str(profile)
                )
            return plan, _route(plan, profile, "explicit")
        raise UserError(f"`input` must be the request text or {{'profile': name}}, got {input!r}.")
    if input is not None and not isinstance(input, str):
        raise UserError(f"`input` must be the request text or {{'profile': name}}, got {input!r}.")
    trusted = frozenset(labels)
    for index, rule in enumerate(rules):
        if _rule_matches(rule, trusted, grant, index):
            return plan, _route(plan, rule["profile"], "rule", rule=rule.get("id", index))
    if len(grant) == 1 or not (input or "").strip():
        return plan, _route(plan, fallback, "fallback")
    return plan, input or ""


def _choices(plan: _Plan) -> dict[str, str | None]:
    return {name: plan.profiles.hint(name) for name in plan.allowed}


def _answer(value: Any) -> tuple[Any, float]:
    """``(profile, confidence)`` from the shapes a classifier may return (see `RouteClassifier`)."""
    answers = getattr(value, "answers", None)  # a ClassifyResult / ClassifierResponse
    if answers is not None:
        value = answers[_QUESTION] if isinstance(answers, Mapping) else getattr(answers, _QUESTION)
    if isinstance(value, str):
        return value, 1.0
    if isinstance(value, Mapping):
        return value.get("profile", value.get("choice")), float(value["confidence"])
    if isinstance(value, tuple | list):
        profile, confidence = value
        return profile, float(confidence)
    profile = getattr(value, "profile", None) or getattr(value, "choice", None)
    return profile, float(value.confidence)


def _finish(plan: _Plan, answer: Any) -> ModelRoute:
    """The classifier's answer as a route; anything malformed, unknown or unsure is the fallback."""
    try:
        profile, confidence = _answer(answer)
    except (TypeError, ValueError, KeyError, AttributeError):
        return _route(plan, plan.fallback, "fallback")
    if not isinstance(profile, str) or profile not in plan.allowed or not 0 <= confidence <= 1:
        return _route(plan, plan.fallback, "fallback")
    if confidence < plan.min_confidence:
        return _route(plan, plan.fallback, "fallback", confidence)
    return _route(plan, profile, "classifier", confidence)


class JevRouteClassifier:
    """The default route classifier: one `classify()` choice question over the allowed profiles and their hints.

    State sent: ``{"input": <request text>}``; question: ``profile``, a choice whose labels are the allowed
    profile names and whose criteria are their hints. Nothing else leaves the process.

    Args:
        model: the Jev model.
        timeout: seconds for the whole call (a timeout routes to the fallback).
        api_key: default ``OPENROUTER_API_KEY``.
        base_url: default ``JEV_BASE_URL`` or OpenRouter.
        llm: answer with this chat model's label logprobs instead of Jev (``classify(..., llm=llm)``); the Jev
            options are then unused and the model's own timeout applies.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        timeout: float = 5.0,
        api_key: str | None = None,
        base_url: str | None = None,
        llm: Any = None,
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.api_key = api_key
        self.base_url = base_url
        self.llm = llm

    def _questions(self, choices: Mapping[str, str | None]) -> dict[str, Any]:
        return {_QUESTION: {"type": "choice", "instructions": _INSTRUCTIONS, "criteria": dict(choices)}}

    def _options(self) -> dict[str, Any]:
        if self.llm is not None:
            return {"llm": self.llm}
        options: dict[str, Any] = {"timeout": self.timeout, "api_key": self.api_key, "base_url": self.base_url}
        if self.model is not None:
            options["model"] = self.model
        return options

    def __call__(self, text: str, choices: Mapping[str, str | None]) -> RouteChoice:
        """Ask Jev which profile fits ``text``."""
        from ai_utils.jev import classify

        answer: Any = classify({"input": text}, self._questions(choices), **self._options()).answers[_QUESTION]
        return answer.choice, answer.confidence

    async def acall(self, text: str, choices: Mapping[str, str | None]) -> RouteChoice:
        """Async twin of ``__call__`` (cancellation aborts the request)."""
        from ai_utils.jev import aclassify

        result = await aclassify({"input": text}, self._questions(choices), **self._options())
        answer: Any = result.answers[_QUESTION]
        return answer.choice, answer.confidence


class _DecisionModelClassifier:
    """A LangChain ``BaseDecisionModel`` asked the same one ``Choice`` question."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def _request(self, text: str, choices: Mapping[str, str | None]) -> dict[str, Any]:
        from langchain_core.decisions import Choice

        question = Choice(instructions=_INSTRUCTIONS, criteria=dict(choices))
        return {"state": {"input": text}, "questions": {_QUESTION: question}}

    def __call__(self, text: str, choices: Mapping[str, str | None]) -> Any:
        return self.model.invoke(self._request(text, choices))

    async def acall(self, text: str, choices: Mapping[str, str | None]) -> Any:
        return await self.model.ainvoke(self._request(text, choices))


def _classifier(classifier: Any) -> Any:
    """``classifier`` as something with ``__call__(text, choices)`` (and, for the async twin, maybe ``acall``)."""
    if classifier is None:
        return JevRouteClassifier()
    if isinstance(classifier, JevRouteClassifier):
        return classifier
    from langchain_core.decisions import BaseDecisionModel
    from langchain_core.language_models import BaseChatModel

    if isinstance(classifier, BaseDecisionModel):
        return _DecisionModelClassifier(classifier)
    if isinstance(classifier, BaseChatModel):
        return JevRouteClassifier(llm=classifier)
    if not callable(classifier):
        raise UserError(
            f"`classifier` must be a function (text, choices) -> (profile, confidence), a decision model or a chat "
            f"model, got {classifier!r}."
        )
    return classifier


def jev_route_classifier(
    *,
    model: str | None = None,
    timeout: float = 5.0,
    api_key: str | None = None,
    base_url: str | None = None,
    llm: Any = None,
) -> JevRouteClassifier:
    """A `JevRouteClassifier` with these options (the default classifier uses the defaults)."""
    return JevRouteClassifier(model=model, timeout=timeout, api_key=api_key, base_url=base_url, llm=llm)


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
) -> ModelRoute:
    """Pick the model profile for one request.

    Example:
        ```python
        free_users = {"id": "free-users", "profile": "fast", "when": {"all_labels": ["tier:free"]}}
        route = resolve_model_route("Summarize this short update.", profiles=profiles, allowed=["fast", "balanced"],
                                    rules=[free_users], fallback="balanced", labels=["tier:pro"])
        llm = get_llm(profile=route.profile, profiles=profiles)
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

    Returns:
        The `ModelRoute`.

    Raises:
        ModelProfileError: an unknown profile, an explicit/rule/fallback profile outside ``allowed``, or a profile
            that cannot be resolved (configuration errors fail closed; classifier failures never raise).
        UserError: malformed arguments.
    """
    plan, outcome = _prepare(input, profiles, allowed, rules, fallback, labels, min_confidence)
    if isinstance(outcome, ModelRoute):
        return outcome
    ask = _classifier(classifier)
    try:
        answer: Any = ask(outcome, _choices(plan))
        if inspect.isawaitable(answer):
            if inspect.iscoroutine(answer):
                answer.close()
            raise TypeError("an async classifier needs aresolve_model_route")
    except Exception:
        return _route(plan, plan.fallback, "fallback")
    return _finish(plan, answer)


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

    Returns:
        The `ModelRoute`. Cancelling the caller cancels the classifier and raises; it never falls back.
    """
    plan, outcome = _prepare(input, profiles, allowed, rules, fallback, labels, min_confidence)
    if isinstance(outcome, ModelRoute):
        return outcome
    ask = _classifier(classifier)
    call = getattr(ask, "acall", ask)
    try:
        async with asyncio.timeout(timeout):
            answer: Any = call(outcome, _choices(plan))
            if inspect.isawaitable(answer):
                answer = await answer
    except Exception:
        return _route(plan, plan.fallback, "fallback")
    return _finish(plan, answer)
