"""The typed form: Questions classes, their runtime checks, and classify() returning typed answers."""

from __future__ import annotations

import dataclasses
from typing import Literal

import pytest

from ai_utils.exceptions import UserError
from ai_utils.jev import (
    ChoiceAnswer,
    ChoiceQuestion,
    NoulAnswer,
    Questions,
    ScoreAnswer,
    aclassify,
    choice,
    classify,
    noul,
    score,
)
from ai_utils.testing.jev_server import FakeJevServer

Team = Literal["billing", "technical", "sales", "other"]
STATE = {"message": "I was charged twice. Please refund one charge urgently.", "customerTier": "business"}


class Triage(Questions):
    category: ChoiceAnswer[Literal["billing", "technical", "sales", "other"]] = choice(
        "Which team should handle `message`?",
        {
            "billing": "Payments, invoices, charges, or refunds",
            "technical": "Bugs, outages, or integrations",
            "sales": "Pricing, upgrades, or new accounts",
            "other": None,
        },
    )
    refund_requested: NoulAnswer = noul(
        "Does `message` explicitly request a refund?",
        {"true": "The customer asks for money back", "false": "No refund is asked for"},
    )
    urgency: ScoreAnswer = score("How urgent is `message`?", ["Can wait", "Time-sensitive", "Immediately blocking"])


def test_classify_with_a_questions_class_returns_an_instance_holding_the_answers(jev: FakeJevServer) -> None:
    jev.answer("category", choice="billing")
    jev.answer("refund_requested", noul=0.96)
    jev.answer("urgency", score=2)

    result = classify(STATE, Triage, base_url=jev.url, api_key=jev.api_key)

    assert isinstance(result.answers, Triage)
    assert result.answers.category.choice == "billing"
    assert result.answers.category.probabilities["billing"] == 0.9
    assert result.answers.refund_requested.noul == 0.96
    assert result.answers.urgency.score == 2.0
    assert result.answers.urgency.confidence == 1.0
    assert result.choices == {"category": result.answers.category}
    assert result.answers["category"] is result.answers.category
    with pytest.raises(KeyError):
        result.answers["categroy"]
    assert set(result.nouls) == {"refund_requested"} and set(result.scores) == {"urgency"}
    assert jev.requests[0].body["questions"] == {
        "category": {
            "type": "choice",
            "instructions": "Which team should handle `message`?",
            "criteria": {
                "billing": "Payments, invoices, charges, or refunds",
                "technical": "Bugs, outages, or integrations",
                "sales": "Pricing, upgrades, or new accounts",
                "other": None,
            },
        },
        "refund_requested": {
            "type": "noul",
            "instructions": "Does `message` explicitly request a refund?",
            "criteria": {"true": "The customer asks for money back", "false": "No refund is asked for"},
        },
        "urgency": {
            "type": "score",
            "instructions": "How urgent is `message`?",
            "criteria": ["Can wait", "Time-sensitive", "Immediately blocking"],
        },
    }


async def test_aclassify_with_a_questions_class_returns_typed_answers(jev: FakeJevServer) -> None:
    jev.answer("category", choice="sales")

    result = await aclassify(STATE, Triage, base_url=jev.url, api_key=jev.api_key)

    assert result.answers.category.choice == "sales"
    assert repr(result.answers).startswith("Triage(category=ChoiceAnswer(")


def test_the_class_keeps_its_questions_and_answers_are_read_only(jev: FakeJevServer) -> None:
    result = classify(STATE, Triage, base_url=jev.url, api_key=jev.api_key)

    assert isinstance(Triage.__dict__["category"], ChoiceQuestion)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.answers.category = result.answers.category  # type: ignore[misc]
    assert result.answers == classify(STATE, Triage, base_url=jev.url, api_key=jev.api_key).answers
    assert result.answers != "Triage"


def test_answers_can_be_built_by_hand_and_are_checked() -> None:
    answers = {
        "category": ChoiceAnswer[Team](choice="other", probabilities={"other": 1.0}, confidence=1.0),
        "refund_requested": NoulAnswer(noul=0.2),
        "urgency": ScoreAnswer(score=0, legend={0: "a"}, probabilities={0: 1.0}, confidence=1),
    }

    triage = Triage(**answers)

    assert triage.category.choice == "other"
    with pytest.raises(UserError, match="needs exactly the answers"):
        Triage(category=answers["category"])  # type: ignore[call-arg]
    with pytest.raises(UserError, match="Triage.urgency needs a ScoreAnswer, got NoulAnswer"):
        Triage(**{**answers, "urgency": NoulAnswer(noul=0.5)})


def test_subclasses_inherit_questions_and_add_their_own(jev: FakeJevServer) -> None:
    class DetailedTriage(Triage):
        language: ChoiceAnswer[Literal["en", "de"]] = choice("Language of `message`?", {"en": None, "de": None})

    result = classify(STATE, DetailedTriage, base_url=jev.url, api_key=jev.api_key)

    assert list(jev.requests[0].body["questions"]) == ["category", "refund_requested", "urgency", "language"]
    assert result.answers.language.choice == "en"
    assert result.answers.category.choice == "billing"


def test_a_literal_that_differs_from_the_labels_is_caught_when_the_class_is_defined() -> None:
    with pytest.raises(UserError, match=r"the Literal declares \['billing', 'other'\] but choice\(\) has the labels"):

        class Bad(Questions):
            category: ChoiceAnswer[Literal["billing", "other"]] = choice(
                "Team?",
                {"biling": None, "other": None},  # type: ignore[dict-item]
            )


def test_a_union_of_literals_and_a_plain_str_choice_are_accepted() -> None:
    class Flexible(Questions):
        a: ChoiceAnswer[Literal["x"] | Literal["y"]] = choice("A?", {"x": None, "y": None})
        b: ChoiceAnswer[str] = choice("B?", {"anything": None, "goes": None})

    assert list(Flexible.__jev_wire__) == ["a", "b"]


def test_an_annotation_of_the_wrong_answer_kind_is_caught() -> None:
    with pytest.raises(UserError, match=r"holds a noul\(\) question but is annotated"):

        class Bad(Questions):
            refund: ScoreAnswer = noul("Refund?")  # type: ignore[assignment]


def test_a_question_without_annotation_or_an_annotation_without_question_is_caught() -> None:
    with pytest.raises(UserError, match="has a question but no annotation"):

        class NoAnnotation(Questions):
            refund = noul("Refund?")

    with pytest.raises(UserError, match="is annotated but has no question"):

        class NoQuestion(Questions):
            refund: NoulAnswer


def test_invalid_typed_questions_fail_when_the_class_is_defined() -> None:
    with pytest.raises(UserError, match="Score 'urgency' has 1 levels"):

        class Bad(Questions):
            urgency: ScoreAnswer = score("How urgent?", ["only one"])


def test_a_questions_class_without_questions_cannot_be_asked(jev: FakeJevServer) -> None:
    class Empty(Questions):
        pass

    with pytest.raises(UserError, match="declares no questions"):
        classify(STATE, Empty, base_url=jev.url, api_key=jev.api_key)
    assert jev.requests == []


def test_annotations_that_cannot_be_resolved_at_runtime_skip_the_runtime_check(jev: FakeJevServer) -> None:
    Local = Literal["a", "b"]  # a name local to this function: get_type_hints cannot see it

    class Deferred(Questions):
        pick: ChoiceAnswer[Local] = choice("Pick?", {"a": None, "b": None})  # type: ignore[valid-type]

    result = classify(STATE, Deferred, base_url=jev.url, api_key=jev.api_key)

    assert result.answers.pick.choice == "a"
