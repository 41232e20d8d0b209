"""classify()/aclassify() through real HTTP against the fake Jev server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.decisions import Choice, Noul, NoulCriteria, Score
from langchain_core.messages import AIMessage, HumanMessage

from ai_utils.exceptions import UserError
from ai_utils.jev import (
    ChoiceAnswer,
    JevAPIError,
    JevResponseError,
    NoulAnswer,
    ScoreAnswer,
    aclassify,
    choice,
    classify,
)
from ai_utils.testing.jev_server import FakeJevServer

FIXTURES = Path(__file__).parent / "fixtures"

STATE = {"message": "I was charged twice. Please refund one charge urgently.", "customerTier": "business"}
CATEGORY = {
    "type": "choice",
    "instructions": "Which team should handle `message`?",
    "criteria": {
        "billing": "Payments, invoices, charges, or refunds",
        "technical": "Bugs, outages, or integrations",
        "sales": "Pricing, upgrades, or new accounts",
        "other": None,
    },
}
REFUND = {"type": "noul", "instructions": "Does `message` explicitly request a refund?"}
URGENCY = {
    "type": "score",
    "instructions": "How urgent is the request in `message`?",
    "criteria": ["Can wait", "Time-sensitive", "Immediately blocking"],
}
SEED_QUESTIONS = {"category": CATEGORY, "refundRequested": REFUND, "urgency": URGENCY}


def run(jev: FakeJevServer, questions: Any = SEED_QUESTIONS, state: Any = STATE, **kwargs: Any) -> Any:
    return classify(state, questions, base_url=jev.url, api_key=jev.api_key, **kwargs)


def test_the_seed_example_answers_choice_noul_and_score_in_the_documented_shapes(jev: FakeJevServer) -> None:
    jev.answer("category", probabilities={"billing": 0.91, "technical": 0.03, "sales": 0.03, "other": 0.03})
    jev.answer("refundRequested", noul=0.97)
    jev.answer("urgency", score=1.7)

    result = run(jev)

    category = result.answers["category"]
    assert isinstance(category, ChoiceAnswer)
    assert category.choice == "billing"
    assert category.probabilities["billing"] == 0.91
    assert set(category.probabilities) == {"billing", "technical", "sales", "other"}
    assert category.confidence == pytest.approx(0.88)
    refund = result.answers["refundRequested"]
    assert isinstance(refund, NoulAnswer)
    assert refund.noul == 0.97
    assert not hasattr(refund, "confidence")
    urgency = result.answers["urgency"]
    assert isinstance(urgency, ScoreAnswer)
    assert urgency.score == 1.7
    assert urgency.probabilities == {0: 0.0, 1: 0.3, 2: 0.7}
    assert urgency.legend == {0: "Can wait", 1: "Time-sensitive", 2: "Immediately blocking"}
    assert 0 <= urgency.confidence <= 1
    assert result.model == "typesafe/jev-1.13-20260917"
    assert result.usage.input_tokens > 270
    assert result.usage.cost == pytest.approx(result.usage.input_tokens * 0.042e-6)
    assert result.id is not None and result.id.startswith("gen-dec-")
    assert result.provider == "TypeSafe"
    assert result.choices == {"category": category}
    assert result.nouls == {"refundRequested": refund}
    assert result.scores == {"urgency": urgency}


def test_the_request_is_the_documented_wire_body_with_bearer_auth(jev: FakeJevServer) -> None:
    run(jev)

    (request,) = jev.requests
    assert request.method == "POST"
    assert request.path == "/api/alpha/decisions"
    assert request.headers["authorization"] == f"Bearer {jev.api_key}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "application/json"
    assert request.body == {"model": "~typesafe/jev-latest", "state": STATE, "questions": SEED_QUESTIONS}
    assert list(request.body["questions"]["category"]["criteria"]) == ["billing", "technical", "sales", "other"]


def test_the_recorded_openrouter_reply_parses_exactly(jev: FakeJevServer) -> None:
    jev.reply_raw((FIXTURES / "openrouter_decision.json").read_bytes())
    questions = {
        "is_urgent": {"type": "noul", "instructions": "Is the message urgent?"},
        "department": {
            "type": "choice",
            "instructions": "Which department?",
            "criteria": {"sales": None, "billing": None, "technical": None},
        },
        "frustration": {
            "type": "score",
            "instructions": "How frustrated is the customer?",
            "criteria": ["Calm", "Frustrated", "Very angry"],
        },
    }

    result = run(jev, questions, model="typesafe/jev-1.13")

    assert result.model == "typesafe/jev-1.13-20260917"
    assert result.answers["is_urgent"] == NoulAnswer(noul=0.95)
    assert result.answers["department"] == ChoiceAnswer(
        choice="billing", probabilities={"sales": 0, "billing": 0.88, "technical": 0.12}, confidence=0.82
    )
    assert result.answers["frustration"] == ScoreAnswer(
        score=1.04,
        legend={0: "Calm", 1: "Frustrated", 2: "Very angry"},
        probabilities={0: 0, 1: 0.96, 2: 0.04},
        confidence=0.94,
    )
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.cost) == (427, 73, 1.7934e-05)
    assert result.usage.total_tokens == 500
    assert result.id == "gen-dec-1789834659-75NM4YNUKx6BSTjWND3L"
    assert result.provider == "TypeSafe"
    assert jev.requests[0].body["model"] == "typesafe/jev-1.13"


def test_langchain_decision_questions_are_sent_in_the_wire_shape(jev: FakeJevServer) -> None:
    questions = {
        "category": Choice(instructions="Which team?", criteria={"billing": "Payments", "other": None}),
        "refund": Noul(instructions="Refund?", criteria=NoulCriteria(true="Asks for money back", false="Does not")),
        "plain": Noul(instructions="Polite?"),
        "urgency": Score(instructions="How urgent?", criteria=["Low", "High"]),
    }
    jev.answer("category", choice="other")

    result = run(jev, questions)

    assert result.answers["category"].choice == "other"
    sent = jev.requests[0].body["questions"]
    assert sent == {
        "category": {
            "type": "choice",
            "instructions": "Which team?",
            "criteria": {"billing": "Payments", "other": None},
        },
        "refund": {
            "type": "noul",
            "instructions": "Refund?",
            "criteria": {"true": "Asks for money back", "false": "Does not"},
        },
        "plain": {"type": "noul", "instructions": "Polite?"},
        "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["Low", "High"]},
    }


def test_langchain_messages_in_state_are_sent_as_role_content_dicts(jev: FakeJevServer) -> None:
    state = {"messages": [HumanMessage("Delete my account"), AIMessage("Are you sure?")], "tool": "delete"}

    run(jev, {"risky": REFUND}, state=state)
    run(jev, {"risky": REFUND}, state=HumanMessage("hi"))

    assert jev.requests[0].body["state"] == {
        "messages": [
            {"role": "user", "content": "Delete my account"},
            {"role": "assistant", "content": "Are you sure?"},
        ],
        "tool": "delete",
    }
    assert jev.requests[1].body["state"] == {"role": "user", "content": "hi"}


def test_a_plain_string_state_is_sent_as_is(jev: FakeJevServer) -> None:
    run(jev, {"refund": REFUND}, state="Refund me")

    assert jev.requests[0].body["state"] == "Refund me"


def test_choice_labels_a_javascript_server_would_mangle_travel_under_safe_keys(jev: FakeJevServer) -> None:
    question = {"type": "choice", "instructions": "Rating?", "criteria": {"1": "bad", "2": "ok", "constructor": "?"}}
    jev.answer("rating", choice="o1_2")

    result = run(jev, {"rating": question})

    sent = jev.requests[0].body["questions"]["rating"]["criteria"]
    assert sent == {"o0_1": "bad", "o1_2": "ok", "o2_constructor": "?"}
    assert result.answers["rating"].choice == "2"
    assert set(result.answers["rating"].probabilities) == {"1", "2", "constructor"}


async def test_aclassify_gives_the_same_answers_as_classify(jev: FakeJevServer) -> None:
    jev.answer("category", choice="technical")

    result = await aclassify(STATE, SEED_QUESTIONS, base_url=jev.url, api_key=jev.api_key)

    assert result.answers["category"].choice == "technical"
    assert jev.requests[0].body == {"model": "~typesafe/jev-latest", "state": STATE, "questions": SEED_QUESTIONS}


def test_the_key_and_base_url_come_from_the_environment(jev: FakeJevServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", jev.api_key)
    monkeypatch.setenv("JEV_BASE_URL", jev.url)

    result = classify(STATE, {"refund": REFUND})

    assert result.answers["refund"].noul == 0.1
    assert len(jev.requests) == 1


def test_an_openai_style_v1_base_url_still_reaches_the_decisions_endpoint(jev: FakeJevServer) -> None:
    classify(STATE, {"refund": REFUND}, base_url=jev.url + "/v1/", api_key=jev.api_key)

    assert jev.requests[0].path == "/api/alpha/decisions"


def test_a_missing_key_is_a_user_error_naming_the_variable_before_any_request(jev: FakeJevServer) -> None:
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        classify(STATE, SEED_QUESTIONS, base_url=jev.url)

    assert jev.requests == []


async def test_aclassify_without_a_key_is_a_user_error(jev: FakeJevServer) -> None:
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        await aclassify(STATE, SEED_QUESTIONS, base_url=jev.url)


def test_typesafe_direct_uses_its_path_key_variable_and_bare_model_ids(
    jev: FakeJevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UserError, match="TYPESAFE_API_KEY"):
        classify(STATE, SEED_QUESTIONS, base_url=jev.typesafe_url, provider="typesafe")
    monkeypatch.setenv("TYPESAFE_API_KEY", jev.api_key)

    result = classify(STATE, SEED_QUESTIONS, base_url=jev.typesafe_url, provider="typesafe")

    (request,) = jev.requests
    assert request.path == "/v1/systemone"
    assert request.body["model"] == "jev-latest"
    assert result.model == "jev-1.13.0"
    assert result.usage.cost is None
    assert result.id == "req_fake1"
    assert result.provider is None


def test_typesafe_direct_accepts_a_noul_with_one_criterion_which_openrouter_refuses(jev: FakeJevServer) -> None:
    question = {"type": "noul", "instructions": "Refund?", "criteria": {"true": "Asks for money back"}}

    with pytest.raises(UserError, match="both 'true' and 'false'"):
        run(jev, {"refund": question})
    result = classify(STATE, {"refund": question}, base_url=jev.typesafe_url, api_key=jev.api_key, provider="typesafe")

    assert result.answers["refund"].noul == 0.1
    assert jev.requests[0].body["questions"]["refund"]["criteria"] == {"true": "Asks for money back"}


def test_a_misspelt_option_is_a_type_error_naming_it_before_any_request(jev: FakeJevServer) -> None:
    with pytest.raises(TypeError, match="classify\\(\\) got an unexpected keyword argument 'timout'"):
        classify(STATE, {"refund": REFUND}, api_key=jev.api_key, base_url=jev.url, timout=5)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="aclassify\\(\\) got an unexpected keyword argument 'modle'"):
        asyncio.run(aclassify(STATE, {"refund": REFUND}, api_key=jev.api_key, modle="x"))  # type: ignore[call-overload]
    assert jev.requests == []
    # the spelled-right options still reach the server
    assert classify(STATE, {"refund": REFUND}, api_key=jev.api_key, base_url=jev.url, timeout=5).answers["refund"]


def test_an_unknown_provider_is_a_user_error() -> None:
    with pytest.raises(UserError, match="'openrouter' or 'typesafe'"):
        classify(STATE, SEED_QUESTIONS, api_key="k", provider="anthropic")  # type: ignore[arg-type]


def test_a_400_reply_is_a_jev_api_error_with_status_and_body_and_is_not_retried(jev: FakeJevServer) -> None:
    with pytest.raises(JevAPIError) as caught:
        run(jev, model="openai/gpt-5")

    assert caught.value.status == 400
    assert caught.value.body == {"error": {"code": 400, "message": "openai/gpt-5 is not a decisions model"}}
    assert "400" in str(caught.value) and "openai/gpt-5 is not a decisions model" in str(caught.value)
    assert len(jev.requests) == 1


def test_a_wrong_key_is_a_401_jev_api_error_that_does_not_leak_the_key(jev: FakeJevServer) -> None:
    with pytest.raises(JevAPIError) as caught:
        classify(STATE, SEED_QUESTIONS, base_url=jev.url, api_key="sk-secret-wrong-key")

    assert caught.value.status == 401
    assert "OPENROUTER_API_KEY" in str(caught.value)
    assert "sk-secret-wrong-key" not in str(caught.value) + repr(caught.value.body)
    assert len(jev.requests) == 1


def test_a_malformed_json_reply_is_a_jev_response_error_with_the_body(jev: FakeJevServer) -> None:
    jev.reply_raw("{not json")

    with pytest.raises(JevResponseError) as caught:
        run(jev)

    assert isinstance(caught.value, JevAPIError)
    assert caught.value.status == 200
    assert caught.value.body == "{not json"


def test_a_reply_missing_an_answer_is_a_jev_response_error(jev: FakeJevServer) -> None:
    jev.reply_raw(json.dumps({"model": "m", "answers": {"category": {"type": "noul", "noul": 0.5}}}))

    with pytest.raises(JevResponseError, match="is a choice but the answer is a 'noul'"):
        run(jev, {"category": CATEGORY})
    jev.reply_raw(json.dumps({"model": "m", "answers": {}}))
    with pytest.raises(JevResponseError, match="no answer for question 'category'"):
        run(jev, {"category": CATEGORY})


def test_a_choice_answer_with_labels_that_were_not_asked_is_a_jev_response_error(jev: FakeJevServer) -> None:
    jev.answer_with(
        lambda name, q, state: {"type": "choice", "choice": "legal", "probabilities": {"legal": 1.0}, "confidence": 1}
    )

    with pytest.raises(JevResponseError, match="invalid"):
        run(jev, {"category": CATEGORY})


def test_a_score_answer_with_wrong_levels_or_range_is_a_jev_response_error(jev: FakeJevServer) -> None:
    bad_levels = {"type": "score", "score": 1, "legend": {}, "probabilities": {"0": 0.5, "5": 0.5}, "confidence": 0.5}
    jev.answer_with(lambda name, q, state: bad_levels)
    with pytest.raises(JevResponseError, match="levels"):
        run(jev, {"urgency": URGENCY})
    jev.answer_with(lambda name, q, state: {"type": "noul", "noul": 1.5})
    with pytest.raises(JevResponseError, match="refund"):
        run(jev, {"refund": REFUND})


def test_a_typed_choice_declared_in_a_dict_runs_like_a_dict_question(jev: FakeJevServer) -> None:
    jev.answer("team", choice="b")

    result = run(jev, {"team": choice("Which team?", {"a": None, "b": "Bees"})})

    assert result.answers["team"].choice == "b"
    assert jev.requests[0].body["questions"]["team"] == {
        "type": "choice",
        "instructions": "Which team?",
        "criteria": {"a": None, "b": "Bees"},
    }


def test_concurrent_aclassify_calls_each_get_their_own_answers(jev: FakeJevServer) -> None:
    jev.answer_with(lambda name, q, state: {"noul": 0.9 if "refund" in state else 0.2})

    async def main() -> list[float]:
        states = ["please refund", "hello"] * 5
        results = await asyncio.gather(
            *(aclassify(s, {"refund": REFUND}, base_url=jev.url, api_key=jev.api_key) for s in states)
        )
        return [r.answers["refund"].noul for r in results]

    assert asyncio.run(main()) == [0.9, 0.2] * 5
    assert len(jev.requests) == 10
