"""Type-checker test for classify(..., llm=...): the typed form keeps its types with any chat model."""

from __future__ import annotations

from typing import Literal, assert_type

from langchain_core.language_models import BaseChatModel

from ai_utils import (
    ChoiceAnswer,
    ClassifyResult,
    JevDecisionModel,
    NoulAnswer,
    Questions,
    ScoreAnswer,
    aclassify,
    choice,
    classify,
    noul,
    score,
)
from ai_utils.jev import Answer

Team = Literal["billing", "technical", "other"]


class Triage(Questions):
    category: ChoiceAnswer[Literal["billing", "technical", "other"]] = choice(
        "Which team should handle `message`?", {"billing": "Payments", "technical": "Bugs", "other": None}
    )
    refund_requested: NoulAnswer = noul("Does `message` explicitly request a refund?")
    urgency: ScoreAnswer = score("How urgent is `message`?", ["Can wait", "Time-sensitive", "Blocking"])


def typed(state: dict[str, str], llm: BaseChatModel) -> None:
    result = classify(state, Triage, llm=llm)
    assert_type(result, ClassifyResult[Triage])
    assert_type(result.answers.category.choice, Team)
    assert_type(result.answers.category.probabilities, dict[Team, float])
    assert_type(result.answers.refund_requested.noul, float)
    assert_type(result.answers.urgency.score, float)
    assert_type(result.answers.urgency.probabilities, dict[int, float])


async def typed_async(state: str, llm: BaseChatModel) -> None:
    result = await aclassify(state, Triage, llm=llm)
    assert_type(result, ClassifyResult[Triage])
    assert_type(result.answers.category.confidence, float)
    untyped = await aclassify(state, {"refund": {"type": "noul", "instructions": "Refund?"}}, llm=llm)
    assert_type(untyped, ClassifyResult[dict[str, Answer]])
    JevDecisionModel(llm=llm)
