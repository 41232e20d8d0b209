"""Route classifiers: who picks a profile when no explicit input or rule decided (see `resolve_model_route`).

The default is `JevRouteClassifier`: one `classify()` choice question (Jev) over the allowed profile names,
with their hints as criteria. A LangChain decision model is asked the same ``Choice``; a chat model answers
through ``classify(..., llm=model)``; a plain function ``(text, {profile: hint}) -> (profile, confidence)``
is called as it is (`ai_utils.routing.route` picks which). `choice_of` reads the shapes their answers come in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

__all__ = [
    "DecisionModelClassifier",
    "JevRouteClassifier",
    "RouteChoice",
    "RouteClassifier",
    "choice_of",
    "jev_route_classifier",
]

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


def choice_of(value: Any) -> tuple[Any, float]:
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


class DecisionModelClassifier:
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


jev_route_classifier = JevRouteClassifier
"""``jev_route_classifier(model=..., timeout=..., ...)``: a `JevRouteClassifier` with these options (the default
classifier uses the defaults)."""
