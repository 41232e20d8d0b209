"""Type-checker test for classify(): run through mypy --strict by tests/jev/test_classify_typing.py."""

from __future__ import annotations

from typing import Literal, assert_type

from ai_utils.jev import (
    Answer,
    ChoiceAnswer,
    ClassifyResult,
    JevClient,
    NoulAnswer,
    Questions,
    ScoreAnswer,
    aclassify,
    choice,
    classify,
    noul,
    score,
)

Team = Literal["billing", "technical", "sales", "other"]


class Triage(Questions):
    category: ChoiceAnswer[Literal["billing", "technical", "sales", "other"]] = choice(
        "Which team should handle `message`?",
        {
            "billing": "Payments",
            "technical": {"what": "Bugs", "examples": ["500 error"]},
            "sales": "Pricing",
            "other": None,
        },
    )
    refund_requested: NoulAnswer = noul("Does `message` explicitly request a refund?")
    urgency: ScoreAnswer = score("How urgent is `message`?", ["Can wait", "Time-sensitive", "Immediately blocking"])


def typed(state: dict[str, str]) -> None:
    result = classify(state, Triage)
    assert_type(result, ClassifyResult[Triage])
    assert_type(result.answers, Triage)
    assert_type(result.answers.category, ChoiceAnswer[Team])
    assert_type(result.answers.category.choice, Team)
    assert_type(result.answers.category.probabilities, dict[Team, float])
    assert_type(result.answers.category.probabilities["billing"], float)
    assert_type(result.answers.category.confidence, float)
    assert_type(result.answers.refund_requested.noul, float)
    assert_type(result.answers.urgency.score, float)
    assert_type(result.answers.urgency.probabilities, dict[int, float])
    assert_type(result.model, str)
    assert_type(result.usage.cost, float | None)
    assert_type(result.id, str | None)
    assert_type(result.answers["category"], Answer)
    if result.answers.category.choice == "billing":
        pass


async def typed_async(state: str) -> None:
    result = await aclassify(state, Triage, timeout=5)
    assert_type(result, ClassifyResult[Triage])
    with JevClient() as client:
        assert_type(client.classify(state, Triage), ClassifyResult[Triage])
        assert_type(await client.aclassify(state, Triage), ClassifyResult[Triage])


def untyped(state: str) -> None:
    result = classify(state, {"refund": {"type": "noul", "instructions": "Refund?"}})
    assert_type(result, ClassifyResult[dict[str, Answer]])
    answer = result.answers["refund"]
    if isinstance(answer, NoulAnswer):
        assert_type(answer.noul, float)
    assert_type(result.choices["category"].choice, str)
