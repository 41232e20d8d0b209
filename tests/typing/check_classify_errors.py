"""Mistakes mypy must reject (tests/jev/test_classify_typing.py asserts each error line)."""

from __future__ import annotations

from typing import Literal

from ai_utils.jev import ChoiceAnswer, NoulAnswer, Questions, choice, classify, noul


class Triage(Questions):
    category: ChoiceAnswer[Literal["billing", "other"]] = choice(
        "Which team?",
        {"biling": "Payments", "other": None},  # misspelt label -> error here
    )
    refund_requested: NoulAnswer = noul("Refund?")


result = classify("text", Triage)
result.answers.categroy  # noqa: B018 - misspelt question name -> error
result.answers.category.probabilities["legal"]  # label that does not exist -> error
if result.answers.category.choice == "biling":  # comparing with a misspelt label -> error
    pass
