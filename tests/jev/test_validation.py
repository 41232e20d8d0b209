"""Invalid questions and states fail with a clear UserError before any request is sent."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.decisions import Box, Noul, NoulCriteria

from ai_utils.exceptions import UserError
from ai_utils.jev import classify
from ai_utils.testing.jev_server import FakeJevServer


def ask(jev: FakeJevServer, questions: Any, state: Any = "some text") -> None:
    classify(state, questions, base_url=jev.url, api_key=jev.api_key)


def choice_with(n: int) -> dict[str, Any]:
    return {"type": "choice", "instructions": "Which?", "criteria": {f"label{i}": None for i in range(n)}}


def score_with(n: int) -> dict[str, Any]:
    return {"type": "score", "instructions": "How much?", "criteria": [f"level {i}" for i in range(n)]}


@pytest.mark.parametrize(
    ("question", "message"),
    [
        (choice_with(256), "256 labels; Jev allows at most 255"),
        (choice_with(0), "has no labels"),
        ({"type": "choice", "instructions": "Which?", "criteria": ["a", "b"]}, "needs `criteria` as a dict"),
        ({"type": "choice", "instructions": "Which?", "criteria": {1: "one"}}, "labels must be strings"),
        (
            {"type": "choice", "instructions": "Which?", "criteria": {"a": object()}},
            "the description of 'a' is a object",
        ),
        (score_with(1), "1 levels; Jev needs 2 to 10"),
        (score_with(11), "11 levels; Jev needs 2 to 10"),
        ({"type": "score", "instructions": "How?", "criteria": "low, high"}, "needs `criteria` as a list"),
        ({"type": "score", "instructions": "How?", "criteria": ["low", None]}, "level 1 is None"),
        ({"type": "noul", "instructions": "Refund?", "criteria": {"true": "yes"}}, "both 'true' and 'false'"),
        ({"type": "noul", "instructions": "Refund?", "criteria": {"yes": "a", "no": "b"}}, "both 'true' and 'false'"),
        ({"type": "noul", "instructions": "Refund?", "criteria": "yes"}, "use a dict with both 'true' and 'false'"),
        ({"type": "noul"}, "needs `instructions`"),
        ({"type": "noul", "instructions": "   "}, "needs `instructions`"),
        ({"type": "noul", "instructions": "Refund?", "options": ["a"]}, "unknown keys ['options']"),
        ({"type": "maybe", "instructions": "Refund?"}, "has type 'maybe'"),
        ({"type": "box", "instructions": "Find the cat"}, "`box` question"),
        ("Is it a refund?", "is a str, not a question"),
    ],
)
def test_an_invalid_question_fails_before_any_request(jev: FakeJevServer, question: Any, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("(", r"\(")) as caught:
        ask(jev, {"q": question})

    assert "'q'" in str(caught.value)
    assert jev.requests == []


def test_the_limits_themselves_are_accepted(jev: FakeJevServer) -> None:
    ask(jev, {"many": choice_with(255), "two": score_with(2), "ten": score_with(10), "one": choice_with(1)})

    assert len(jev.requests) == 1
    assert jev.requests[0].body["questions"]["one"]["criteria"] == {"label0": None}


def test_json_instructions_and_criteria_are_sent_as_json(jev: FakeJevServer) -> None:
    question = {
        "type": "score",
        "instructions": {"task": "Rate urgency", "field": "message"},
        "criteria": [{"what": "low", "examples": ["later"]}, {"what": "high", "examples": ("now",)}],
    }

    ask(jev, {"urgency": question})

    assert jev.requests[0].body["questions"]["urgency"] == {
        "type": "score",
        "instructions": {"task": "Rate urgency", "field": "message"},
        "criteria": [{"what": "low", "examples": ["later"]}, {"what": "high", "examples": ["now"]}],
    }


@pytest.mark.parametrize(
    ("questions", "message"),
    [
        ({}, "`questions` is empty"),
        ([("q", {})], "must be a dict of name -> question"),
        ({"": {}}, "non-empty strings"),
    ],
)
def test_bad_questions_containers_fail_before_any_request(jev: FakeJevServer, questions: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        ask(jev, questions)

    assert jev.requests == []


def test_langchain_box_questions_and_one_sided_noul_criteria_are_refused(jev: FakeJevServer) -> None:
    with pytest.raises(UserError, match="`box` question"):
        ask(jev, {"where": Box(instructions="Find the cat")})
    with pytest.raises(UserError, match="both 'true' and 'false'"):
        ask(jev, {"risky": Noul(instructions="Risky?", criteria=NoulCriteria(true="Deletes data"))})

    assert jev.requests == []


@pytest.mark.parametrize(
    ("state", "message"),
    [(None, "got NoneType"), (42, "got int"), (b"bytes", "got bytes"), ({"when": {1, 2}}, "set is not JSON")],
)
def test_a_state_that_is_not_json_fails_before_any_request(jev: FakeJevServer, state: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        ask(jev, {"q": {"type": "noul", "instructions": "Refund?"}}, state=state)

    assert jev.requests == []


def test_a_state_with_nan_fails_before_any_request(jev: FakeJevServer) -> None:
    with pytest.raises(UserError, match="cannot be sent as JSON"):
        ask(jev, {"q": {"type": "noul", "instructions": "Refund?"}}, state={"x": float("nan")})


def test_dates_and_pydantic_models_in_state_are_sent_as_json(jev: FakeJevServer) -> None:
    import datetime as dt
    from types import MappingProxyType

    from pydantic import BaseModel

    class Ticket(BaseModel):
        title: str

    state = {"when": dt.date(2026, 11, 29), "ticket": Ticket(title="Refund"), "meta": MappingProxyType({"a": 1})}

    ask(jev, {"q": {"type": "noul", "instructions": "Refund?"}}, state=state)

    assert jev.requests[0].body["state"] == {"when": "2026-11-29", "ticket": {"title": "Refund"}, "meta": {"a": 1}}


def test_a_request_far_above_the_token_limit_fails_before_sending(jev: FakeJevServer) -> None:
    with pytest.raises(UserError, match="at most 64000"):
        ask(jev, {"q": {"type": "noul", "instructions": "Refund?"}}, state="x" * 300_000)

    assert jev.requests == []


@pytest.mark.parametrize("timeout", [0, -1, "10", True])
def test_a_bad_timeout_is_a_user_error(jev: FakeJevServer, timeout: Any) -> None:
    with pytest.raises(UserError, match="`timeout` must be a positive number"):
        classify(
            "x", {"q": {"type": "noul", "instructions": "Refund?"}}, base_url=jev.url, api_key="k", timeout=timeout
        )


def test_a_blank_model_is_a_user_error(jev: FakeJevServer) -> None:
    with pytest.raises(UserError, match="`model` must be a model id"):
        classify("x", {"q": {"type": "noul", "instructions": "Refund?"}}, base_url=jev.url, api_key="k", model=" ")
