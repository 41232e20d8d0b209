"""`LLMJudge`: rubric-based LLM-as-a-judge scoring, routed (and audited) through a `Gateway`.

```python
judge = LLMJudge(
    gateway=gateway,
    feature="support.run.judge",
    rubric={
        "name": "support-run",
        "pass_threshold": 0.75,
        "dimensions": [
            {"name": "accuracy", "description": "Was the recommendation correct?", "weight": 2},
            {"name": "tone", "description": "Was the language professional?"},
        ],
    },
)
result = judge.evaluate("Score this support run.", transcript, reference=expected)
result.score, result.score_percent, result.passed, result.dimensions
```
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field, ValidationError, field_validator

from ai_utils.exceptions import ModelOutputError, UserError
from ai_utils.gateway.actor import Actor
from ai_utils.gateway.gateway import Gateway

__all__ = ["DimensionScore", "JudgeDimension", "JudgeResult", "JudgeRubric", "LLMJudge"]


class JudgeDimension(BaseModel):
    """One rubric dimension.

    Args:
        name: unique within the rubric.
        description: what the judge checks.
        weight: relative weight in the overall score (> 0).
    """

    name: str = Field(min_length=1)
    description: str
    weight: float = Field(default=1.0, gt=0)


class JudgeRubric(BaseModel):
    """What the judge scores.

    Args:
        name: the rubric name (recorded on audit rows as ``metadata["judge_rubric"]``).
        pass_threshold: the overall score (0..1) needed to pass.
        dimensions: at least one dimension, unique names.
    """

    name: str
    pass_threshold: float = Field(default=0.7, ge=0, le=1)
    dimensions: list[JudgeDimension] = Field(min_length=1)

    @field_validator("dimensions")
    @classmethod
    def _unique(cls, value: list[JudgeDimension]) -> list[JudgeDimension]:
        names = [d.name for d in value]
        if len(set(names)) != len(names):
            raise ValueError(f"dimension names must be unique, got {names!r}")
        return value


class DimensionScore(BaseModel):
    """The judge's verdict on one dimension.

    Args:
        name: the dimension.
        score: 0..1.
        reasoning: why.
        evidence: quotes or facts from the subject.
    """

    name: str
    score: float = Field(ge=0, le=1)
    reasoning: str = ""
    evidence: list[str] = Field(default_factory=list)


class _JudgeOutput(BaseModel):
    """Scores for every rubric dimension."""

    dimensions: list[DimensionScore]


class JudgeResult(BaseModel):
    """An evaluation.

    Args:
        score: the weighted mean of the dimension scores, 0..1.
        score_percent: ``score`` on 0..100.
        passed: ``score >= rubric.pass_threshold``.
        dimensions: one score per rubric dimension, in rubric order.
    """

    score: float
    score_percent: float
    passed: bool
    dimensions: list[DimensionScore]


_SYSTEM = """You are a strict, fair evaluator. Score the subject on each rubric dimension from 0 (fails) to 1 \
(fully meets it). Quote short evidence from the subject. Answer only with JSON of the form \
{{"dimensions": [{{"name": str, "score": number 0..1, "reasoning": str, "evidence": [str]}}]}}, one entry per \
dimension, using exactly these names.

Rubric "{name}":
{dimensions}"""


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2, default=str)


class LLMJudge:
    """Score a finished run (or any text) against a rubric with a model behind a gateway feature.

    The judge's model calls go through ``gateway.llm(feature)``, so they are policy-checked and audited like
    every other call.

    Args:
        gateway: the gateway.
        feature: the judge's feature (use a separate route, e.g. ``"support.run.judge"``).
        rubric: a `JudgeRubric` or a mapping of its fields.
        actor: the actor for the judge's calls (merged with the gateway's ``default_actor``).
        max_tokens: output token cap (set on models that have ``max_tokens``).
        temperature: sampling temperature (set on models that have ``temperature``).
        metadata: recorded on every audit row of the judge.

    Raises:
        UserError: an invalid rubric.
    """

    def __init__(
        self,
        *,
        gateway: Gateway,
        feature: str,
        rubric: JudgeRubric | Mapping[str, Any],
        actor: Actor | Mapping[str, Any] | None = None,
        max_tokens: int = 1200,
        temperature: float = 0,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        try:
            self.rubric = rubric if isinstance(rubric, JudgeRubric) else JudgeRubric.model_validate(dict(rubric))
        except ValidationError as err:
            raise UserError(f"Invalid judge rubric {rubric!r}: {err}. Fix the rubric fields.") from err
        self.gateway = gateway
        self.feature = feature
        self.actor = actor
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.metadata = {**(metadata or {}), "judge_rubric": self.rubric.name}

    def _model(self, parent_run_id: str | UUID | None = None) -> Any:
        llm = self.gateway.llm(self.feature, actor=self.actor, metadata=self.metadata, parent_run_id=parent_run_id)
        fields = type(llm).model_fields
        if "temperature" in fields:
            llm.temperature = self.temperature  # type: ignore[attr-defined]
        if "max_tokens" in fields:
            llm.max_tokens = self.max_tokens  # type: ignore[attr-defined]
        return _structured(llm)

    def _messages(self, task: str, subject: Any, reference: Any) -> list[BaseMessage]:
        dimensions = "\n".join(f"- {d.name} (weight {d.weight:g}): {d.description}" for d in self.rubric.dimensions)
        parts = [f"Task:\n{task}", f"Subject:\n{_as_text(subject)}"]
        if reference is not None:
            parts.append(f"Reference (expected outcome):\n{_as_text(reference)}")
        return [
            SystemMessage(_SYSTEM.format(name=self.rubric.name, dimensions=dimensions)),
            HumanMessage("\n\n".join(parts)),
        ]

    def evaluate(
        self, task: str, subject: Any, reference: Any = None, *, parent_run_id: str | UUID | None = None
    ) -> JudgeResult:
        """Score ``subject`` for ``task``.

        Args:
            task: what the subject was supposed to achieve.
            subject: the output or trace to judge (strings as is, anything else as JSON).
            reference: an expected outcome, if known.
            parent_run_id: the run that produced the subject; recorded as the judge's audit rows'
                ``parent_run_id``, so a score can be traced back to its run.

        Returns:
            The `JudgeResult`.

        Raises:
            GatewayError: the gateway denied the judge's call.
            ModelOutputError: the model answered without scores that fit the rubric (plain text, a non-finite or
                out-of-range score).
        """
        try:
            output = self._model(parent_run_id).invoke(self._messages(task, subject, reference))
        except (OutputParserException, ValidationError) as error:
            raise _unscored(error) from error
        return self._score(output)

    async def aevaluate(
        self, task: str, subject: Any, reference: Any = None, *, parent_run_id: str | UUID | None = None
    ) -> JudgeResult:
        """Async `evaluate`.

        Args:
            task: what the subject was supposed to achieve.
            subject: the output or trace to judge.
            reference: an expected outcome, if known.
            parent_run_id: the run that produced the subject (see `evaluate`).

        Returns:
            The `JudgeResult`.

        Raises:
            GatewayError: the gateway denied the judge's call.
            ModelOutputError: the model answered without scores that fit the rubric (see `evaluate`).
        """
        try:
            output = await self._model(parent_run_id).ainvoke(self._messages(task, subject, reference))
        except (OutputParserException, ValidationError) as error:
            raise _unscored(error) from error
        return self._score(output)

    def _score(self, output: _JudgeOutput | None) -> JudgeResult:
        if not isinstance(output, _JudgeOutput):  # a plain-text answer where the scores were asked for
            raise _unscored(None)
        given = {d.name: d for d in output.dimensions}
        scored = [
            given.get(d.name)
            or DimensionScore(name=d.name, score=0, reasoning="The judge did not score this dimension.")
            for d in self.rubric.dimensions
        ]
        total_weight = sum(d.weight for d in self.rubric.dimensions)
        score = sum(s.score * d.weight for s, d in zip(scored, self.rubric.dimensions, strict=True)) / total_weight
        score = round(score, 6)
        return JudgeResult(
            score=score,
            score_percent=round(score * 100, 2),
            passed=score >= self.rubric.pass_threshold,
            dimensions=scored,
        )


def _unscored(error: Exception | None) -> ModelOutputError:
    problem = "no scores" if error is None else f"scores that do not fit the rubric's schema ({type(error).__name__})"
    detail = str(error)[:500] if error is not None else "no structured output"
    return ModelOutputError(
        f"The judge's model answered with {problem}: each dimension needs a finite score between 0 and 1. "
        "Try again or route the judge to a model that supports structured output.",
        errors=detail,
        attempts=1,
    )


def _structured(llm: BaseChatModel) -> Any:
    return llm.with_structured_output(_JudgeOutput)
