from __future__ import annotations

import json
from typing import Any

import pytest
from _provider_servers import FakeDeepSeekServer

from ai_utils.exceptions import ModelOutputError, UserError
from ai_utils.gateway import Gateway, GatewayError, MemoryAuditSink, Route
from ai_utils.gateway.judge import JudgeRubric, LLMJudge

RUBRIC = {
    "name": "support-run",
    "pass_threshold": 0.75,
    "dimensions": [
        {"name": "accuracy", "description": "Was the recommendation correct?", "weight": 2},
        {"name": "safety", "description": "Did the run avoid unauthorized actions?"},
        {"name": "tone", "description": "Was the language professional?"},
    ],
}


def _reply(**scores: float) -> str:
    return json.dumps(
        {
            "dimensions": [
                {"name": name, "score": score, "reasoning": f"{name} reasoning", "evidence": [f"{name} quote"]}
                for name, score in scores.items()
            ]
        }
    )


def _judge(*replies: str, **kwargs: Any) -> tuple[LLMJudge, MemoryAuditSink, Gateway]:
    sink = MemoryAuditSink()
    gateway = Gateway(
        routes=[Route("support.run.judge", "fake", "judge-model", {"responses": list(replies)})], audit=sink
    )
    judge = LLMJudge(gateway=gateway, feature="support.run.judge", rubric=RUBRIC, actor={"user_id": "ops"}, **kwargs)
    return judge, sink, gateway


def test_score_is_the_weighted_mean_and_pass_uses_the_threshold() -> None:
    judge, sink, _ = _judge(_reply(accuracy=1.0, safety=0.5, tone=0.5))
    result = judge.evaluate("Score this run.", {"steps": ["triage"]}, reference="Refund approved.")

    assert result.score == pytest.approx(0.75)
    assert result.score_percent == pytest.approx(75.0)
    assert result.passed
    assert [(d.name, d.evidence) for d in result.dimensions] == [
        ("accuracy", ["accuracy quote"]),
        ("safety", ["safety quote"]),
        ("tone", ["tone quote"]),
    ]
    [entry] = sink.entries
    assert (entry.feature, entry.status, entry.metadata) == (
        "support.run.judge",
        "succeeded",
        {"judge_rubric": "support-run"},
    )
    assert "Refund approved." in (entry.request_summary or "")
    assert "accuracy (weight 2)" in (entry.request_summary or "")


def test_below_threshold_fails_and_missing_dimensions_score_zero() -> None:
    judge, _, _ = _judge(_reply(accuracy=1.0, tone=1.0, unknown=1.0))
    result = judge.evaluate("t", "subject")
    assert result.score == pytest.approx(0.75)
    assert result.dimensions[1].score == 0 and "did not score" in result.dimensions[1].reasoning
    judge, _, _ = _judge(_reply(accuracy=0.5, safety=0.5, tone=0.5))
    assert not judge.evaluate("t", "s").passed


async def test_aevaluate_is_audited_too() -> None:
    judge, sink, _ = _judge(_reply(accuracy=0.2, safety=0.2, tone=0.2))
    result = await judge.aevaluate("t", "s")
    assert result.score == pytest.approx(0.2)
    assert len(sink.entries) == 1


def test_the_gateway_policy_applies_to_the_judge() -> None:
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("j", "fake", "m", {"responses": ["{}"]})], audit=sink)
    judge = LLMJudge(gateway=gateway, feature="j", rubric=RUBRIC)
    with pytest.raises(GatewayError, match="actor"):
        judge.evaluate("t", "s")
    assert sink.entries[0].status == "blocked"


def test_temperature_and_max_tokens_are_set_on_models_that_have_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    gateway = Gateway(routes=[Route("j", "openai", "gpt-4.1-mini")], enforce_actor=False)
    judge = LLMJudge(gateway=gateway, feature="j", rubric=RUBRIC, max_tokens=99, temperature=0.3)
    bound = judge._model()
    model = bound.first.bound if hasattr(bound, "first") else bound
    assert (model.temperature, model.max_tokens) == (0.3, 99)


def test_invalid_rubrics_are_user_errors() -> None:
    gateway = Gateway(routes=[Route("j", "fake", "m", {"responses": ["{}"]})])
    for rubric in (
        {"name": "r", "dimensions": []},
        {"name": "r", "dimensions": [{"name": "a", "description": "x", "weight": 0}]},
        {"name": "r", "dimensions": [{"name": "a", "description": "x"}, {"name": "a", "description": "y"}]},
        {"name": "r", "pass_threshold": 2, "dimensions": [{"name": "a", "description": "x"}]},
    ):
        with pytest.raises(UserError, match="Invalid judge rubric"):
            LLMJudge(gateway=gateway, feature="j", rubric=rubric)
    assert (
        LLMJudge(gateway=gateway, feature="j", rubric=JudgeRubric.model_validate(RUBRIC)).rubric.pass_threshold == 0.75
    )


@pytest.mark.parametrize(
    "reply",
    [
        "It looks fine to me.",
        '{"dimensions": [{"name": "accuracy", "score": NaN, "reasoning": "r", "evidence": []}]}',
        '{"dimensions": [{"name": "accuracy", "score": Infinity, "reasoning": "r", "evidence": []}]}',
        _reply(accuracy=7.0),
    ],
)
async def test_a_reply_without_usable_scores_is_a_model_output_error(reply: str) -> None:
    judge, _, _ = _judge(reply, reply)
    with pytest.raises(ModelOutputError, match="judge's model"):
        judge.evaluate("t", "s")
    with pytest.raises(ModelOutputError, match="judge's model"):
        await judge.aevaluate("t", "s")


def test_a_judge_whose_provider_answers_in_plain_text_raises_a_model_output_error(
    deepseek_server: FakeDeepSeekServer,
) -> None:
    # DeepSeek's structured output is a tool call; a model that answers in text instead leaves nothing to parse.
    deepseek_server.reply("All good, 10/10.")
    gateway = Gateway(routes=[Route("judge", "deepseek", "deepseek-chat", {"max_retries": 0})])
    judge = LLMJudge(gateway=gateway, feature="judge", rubric=RUBRIC, actor={"user_id": "ops"})
    with pytest.raises(ModelOutputError, match="no scores"):
        judge.evaluate("t", "s", parent_run_id="run-1")
