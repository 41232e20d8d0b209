"""Typed questions and answers for `classify()`.

Declare questions as a class: each field is annotated with its answer type and defaults to its
question. A type checker then knows every question name and every choice label:

```python
class Triage(Questions):
    category: ChoiceAnswer[Literal["billing", "technical", "other"]] = choice(
        "Which team should handle `message`?", {"billing": "Payments", "technical": "Bugs", "other": None}
    )
    refund_requested: NoulAnswer = noul("Does `message` explicitly request a refund?")
    urgency: ScoreAnswer = score("How urgent is `message`?", ["Can wait", "Time-sensitive", "Blocking"])

result = classify(state, Triage)       # ClassifyResult[Triage]
result.answers.category.choice         # Literal["billing", "technical", "other"]
```

`choice()`, `noul()` and `score()` are typed as returning the answer (like pydantic's `Field`), so
``choice(..., {"biling": ...})`` under a ``ChoiceAnswer[Literal["billing", ...]]`` annotation is a type
error. At runtime they return question objects; the class checks them (and the labels against the
``Literal``) when it is defined.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, Literal, TypeAlias, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from typing_extensions import dataclass_transform

from ai_utils.exceptions import UserError
from ai_utils.jev._validation import QuestionSpec, wire_question

__all__ = [
    "Answer",
    "ChoiceAnswer",
    "ChoiceQuestion",
    "ClassifyResult",
    "Content",
    "NoulAnswer",
    "NoulQuestion",
    "Questions",
    "ScoreAnswer",
    "ScoreQuestion",
    "Usage",
    "choice",
    "noul",
    "score",
]

Content: TypeAlias = str | dict[str, JsonValue] | list[JsonValue]
"""Question instructions and criteria: text, or a JSON object or array."""

L = TypeVar("L", bound=str)
A = TypeVar("A")


class ChoiceAnswer(BaseModel, Generic[L]):
    """The answer to a choice question: the most probable label, every label's probability, a confidence."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["choice"] = "choice"
    choice: L
    """The most probable label."""
    probabilities: dict[L, float]
    """Probability of every label sent (rounded to 2 decimals by the API; sums are about 1)."""
    confidence: float = Field(ge=0.0, le=1.0)
    """``(p_max - 1/K) / (1 - 1/K)``: 0 when every label is equally likely, 1 when one label is certain."""


class NoulAnswer(BaseModel):
    """The answer to a noul (yes/no) question: the probability of yes. There is no separate confidence."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["noul"] = "noul"
    noul: float = Field(ge=0.0, le=1.0)
    """P(yes), from 0 to 1."""


class ScoreAnswer(BaseModel):
    """The answer to a score question: the expected level (may be fractional), its distribution, a confidence."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["score"] = "score"
    score: float
    """Expected level, ``sum(i * p_i)``: between 0 and N-1, e.g. 1.7."""
    legend: dict[int, JsonValue]
    """The level descriptions that were sent, keyed by level 0..N-1."""
    probabilities: dict[int, float]
    """Probability of every level 0..N-1."""
    confidence: float = Field(ge=0.0, le=1.0)
    """How concentrated the distribution is around its most probable level (0..1)."""


Answer: TypeAlias = ChoiceAnswer[str] | NoulAnswer | ScoreAnswer
"""Any answer; dispatch on ``.type`` or ``isinstance``."""


class Usage(BaseModel):
    """Tokens billed for one request, and the cost in USD when OpenRouter reports it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    """USD; OpenRouter only (TypeSafe direct never sends it)."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifyResult(Generic[A]):
    """What `classify()` returns.

    Attributes:
        answers: with dict questions, a dict of question name -> answer; with a `Questions` class, an
            instance of it whose fields hold the answers.
        model: the exact model version that answered, e.g. ``"typesafe/jev-1.13-20260917"``.
        usage: tokens and (OpenRouter) cost.
        id: the request id (OpenRouter ``gen-dec-...`` or TypeSafe's ``x-typesafe-request-id``), if any.
        provider: who served the request (OpenRouter sends ``"TypeSafe"``), if known.
    """

    answers: A
    model: str
    usage: Usage
    id: str | None = None
    provider: str | None = None

    @property
    def choices(self) -> dict[str, ChoiceAnswer[str]]:
        """The choice answers by question name."""
        return {name: a for name, a in answer_items(self.answers) if isinstance(a, ChoiceAnswer)}

    @property
    def nouls(self) -> dict[str, NoulAnswer]:
        """The noul answers by question name."""
        return {name: a for name, a in answer_items(self.answers) if isinstance(a, NoulAnswer)}

    @property
    def scores(self) -> dict[str, ScoreAnswer]:
        """The score answers by question name."""
        return {name: a for name, a in answer_items(self.answers) if isinstance(a, ScoreAnswer)}


def answer_items(answers: object) -> list[tuple[str, Answer]]:
    """``(name, answer)`` pairs of a dict of answers or a `Questions` instance."""
    if isinstance(answers, Questions):
        return [(name, getattr(answers, name)) for name in type(answers).__jev_fields__]
    return list(cast("Mapping[str, Answer]", answers).items())


@dataclasses.dataclass(frozen=True)
class ChoiceQuestion(QuestionSpec):
    """A choice question: pick one label. Made by `choice()`."""

    instructions: Content
    criteria: Mapping[str, JsonValue]

    def as_dict(self) -> dict[str, Any]:
        """Return the question dict."""
        return {"type": "choice", "instructions": self.instructions, "criteria": self.criteria}


@dataclasses.dataclass(frozen=True)
class NoulQuestion(QuestionSpec):
    """A noul (yes/no) question. Made by `noul()`."""

    instructions: Content
    criteria: Mapping[str, JsonValue] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Return the question dict."""
        question: dict[str, Any] = {"type": "noul", "instructions": self.instructions}
        if self.criteria is not None:
            question["criteria"] = self.criteria
        return question


@dataclasses.dataclass(frozen=True)
class ScoreQuestion(QuestionSpec):
    """A score question on an ordered scale. Made by `score()`."""

    instructions: Content
    criteria: Sequence[JsonValue]

    def as_dict(self) -> dict[str, Any]:
        """Return the question dict."""
        return {"type": "score", "instructions": self.instructions, "criteria": self.criteria}


def choice(instructions: Content, criteria: Mapping[L, JsonValue]) -> ChoiceAnswer[L]:
    """Declare a choice question in a `Questions` class.

    Args:
        instructions: the whole question (Jev never sees the field name), e.g. "Which team should handle `message`?".
        criteria: label -> description (a string, JSON, or None to judge by the label alone); 1 to 255 labels.

    Returns:
        The question object; typed as the answer so the field's annotation checks the labels.
    """
    return cast("ChoiceAnswer[L]", ChoiceQuestion(instructions, cast("Mapping[str, JsonValue]", criteria)))


def noul(instructions: Content, criteria: Mapping[Literal["true", "false"], JsonValue] | None = None) -> NoulAnswer:
    """Declare a noul (yes/no) question in a `Questions` class.

    Args:
        instructions: the whole yes/no question, e.g. "Does `message` explicitly request a refund?".
        criteria: optional ``{"true": "...", "false": "..."}`` describing both outcomes.

    Returns:
        The question object; typed as the answer.
    """
    return cast("NoulAnswer", NoulQuestion(instructions, cast("Mapping[str, JsonValue] | None", criteria)))


def score(instructions: Content, criteria: Sequence[JsonValue]) -> ScoreAnswer:
    """Declare a score question in a `Questions` class.

    Args:
        instructions: the whole question, e.g. "How urgent is `message`?".
        criteria: 2 to 10 level descriptions, lowest first.

    Returns:
        The question object; typed as the answer.
    """
    return cast("ScoreAnswer", ScoreQuestion(instructions, criteria))


_ANSWER_TYPES: dict[type[QuestionSpec], type[BaseModel]] = {
    ChoiceQuestion: ChoiceAnswer,
    NoulQuestion: NoulAnswer,
    ScoreQuestion: ScoreAnswer,
}
_HELPER_NAMES = {ChoiceQuestion: "choice", NoulQuestion: "noul", ScoreQuestion: "score"}


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(choice, noul, score))
class Questions:
    """Base class for a typed set of questions; see the module docstring.

    Subclass it with fields ``name: <AnswerType> = choice(...) | noul(...) | score(...)``. Pass the class to
    `classify()`; ``result.answers`` is then an instance whose fields hold the answers.
    """

    __jev_fields__: ClassVar[dict[str, QuestionSpec]] = {}
    __jev_wire__: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: dict[str, QuestionSpec] = {}
        for base in reversed(cls.__mro__[1:]):
            fields.update(base.__dict__.get("__jev_fields__", {}))
        annotations: dict[str, Any] = cls.__dict__.get("__annotations__", {})
        for name, value in cls.__dict__.items():
            if isinstance(value, QuestionSpec):
                if name not in annotations:
                    raise UserError(
                        f"{cls.__name__}.{name} has a question but no annotation. "
                        f"Annotate it, e.g. `{name}: NoulAnswer = noul(...)`."
                    )
                fields[name] = value
        for name, annotation in annotations.items():
            if name not in fields and "ClassVar" not in str(annotation):
                raise UserError(
                    f"{cls.__name__}.{name} is annotated but has no question. "
                    f"Give it a default: `{name}: NoulAnswer = noul(...)` (or choice(...) / score(...))."
                )
        cls.__jev_fields__ = fields
        cls.__jev_wire__ = {name: wire_question(name, spec) for name, spec in fields.items()}
        _check_annotations(cls, fields)

    def __init__(self, **answers: Any) -> None:
        """Hold one answer per question (`classify()` builds these for you)."""
        fields = type(self).__jev_fields__
        if set(answers) != set(fields):
            raise UserError(
                f"{type(self).__name__} needs exactly the answers {sorted(fields)!r}, got {sorted(answers)!r}."
            )
        for name, answer in answers.items():
            expected = _ANSWER_TYPES[type(fields[name])]
            if not isinstance(answer, expected):
                raise UserError(
                    f"{type(self).__name__}.{name} needs a {expected.__name__}, got {type(answer).__name__}."
                )
            object.__setattr__(self, name, answer)

    def __getitem__(self, name: str) -> Answer:
        """The answer to question ``name``, as with dict questions (``result.answers["category"]``)."""
        if name not in type(self).__jev_fields__:
            raise KeyError(name)
        answer: Answer = self.__dict__[name]
        return answer

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}: answers are read-only")

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={self.__dict__.get(name)!r}" for name in type(self).__jev_fields__)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]


def _check_annotations(cls: type[Questions], fields: Mapping[str, QuestionSpec]) -> None:
    """Check each field's annotation against its question (kind, and choice labels against the Literal).

    Annotations that cannot be resolved here (a name local to a function) are skipped: the type checker
    still sees them.
    """
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        return
    for name, spec in fields.items():
        hint = hints.get(name)
        expected = _ANSWER_TYPES[type(spec)]
        origin = _pydantic_origin(hint)
        if origin is not expected:
            raise UserError(
                f"{cls.__name__}.{name} holds a {_HELPER_NAMES[type(spec)]}() question but is annotated {hint!r}. "
                f"Annotate it as `{expected.__name__}`"
                + ('[Literal["label", ...]]`.' if expected is ChoiceAnswer else "`.")
            )
        if isinstance(spec, ChoiceQuestion):
            declared = _literal_labels(hint)
            labels = set(cls.__jev_wire__[name]["criteria"])
            if declared is not None and declared != labels:
                raise UserError(
                    f"{cls.__name__}.{name}: the Literal declares {sorted(declared)!r} but choice() has the labels "
                    f"{sorted(labels)!r}. Make them the same."
                )


def _pydantic_origin(hint: Any) -> Any:
    metadata = getattr(hint, "__pydantic_generic_metadata__", None)
    if metadata and metadata.get("origin") is not None:
        return metadata["origin"]
    return hint


def _literal_labels(hint: Any) -> set[str] | None:
    metadata = getattr(hint, "__pydantic_generic_metadata__", None)
    args = metadata.get("args") if metadata else None
    if not args:
        return None
    labels: set[str] = set()
    pending = [args[0]]
    while pending:
        arg = pending.pop()
        origin = typing.get_origin(arg)
        if origin is Literal:
            labels.update(typing.get_args(arg))
        elif origin is typing.Union or origin is types.UnionType:
            pending.extend(typing.get_args(arg))
        else:
            return None
    return labels
