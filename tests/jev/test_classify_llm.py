"""classify(..., llm=...): Jev-style answers from a chat model's label logprobs, over real HTTP.

The chat model is `get_llm("local", ...)` (ChatOpenAI underneath) talking to FakeOpenAIServer, which
answers with real ``choices[0].logprobs.content[].top_logprobs``. A FakeJevServer is configured as the
Jev endpoint (env and key), so any Jev request would succeed and be recorded: none may be made.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Literal

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AutoModeMiddleware
from langchain_core.decisions import Choice, ClassifierResponse, Noul, NoulCriteria, Score
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from ai_utils import (
    ChoiceAnswer,
    JevDecisionModel,
    ModelOutputError,
    NoulAnswer,
    Questions,
    ScoreAnswer,
    UserError,
    aclassify,
    choice,
    classify,
    get_llm,
    noul,
    score,
)
from ai_utils.testing import FakeChatModel, FakeJevServer, FakeOpenAIServer

QUESTIONS: dict[str, Any] = {
    "category": {
        "type": "choice",
        "instructions": "Which team should handle `message`?",
        "criteria": {"billing": "Payments or refunds", "technical": "Bugs", "other": None},
    },
    "refund": {"type": "noul", "instructions": "Does `message` explicitly request a refund?"},
    "urgency": {
        "type": "score",
        "instructions": "How urgent is `message`?",
        "criteria": ["Can wait", "Time-sensitive", "Immediately blocking"],
    },
}
STATE = {"message": "I was charged twice this month. Please refund one charge, today!"}


class Triage(Questions):
    category: ChoiceAnswer[Literal["billing", "technical", "other"]] = choice(
        "Which team should handle `message`?", {"billing": "Payments or refunds", "technical": "Bugs", "other": None}
    )
    refund: NoulAnswer = noul("Does `message` explicitly request a refund?")
    urgency: ScoreAnswer = score("How urgent is `message`?", ["Can wait", "Time-sensitive", "Immediately blocking"])


def softmax(*logprobs: float) -> list[float]:
    weights = [math.exp(value) for value in logprobs]
    return [weight / sum(weights) for weight in weights]


def script(server: FakeOpenAIServer) -> None:
    # Real servers also return non-label tokens and case/space variants of one label.
    server.reply(
        "A", logprobs={"A": -0.2, " B": -2.0, "b": -3.0, "Sure": -4.0}, when="Which team", model="fake-gpt-2026-09"
    )
    server.reply("Yes", logprobs={"Yes": -0.1, "No": -2.4, "yes": -3.5}, when="request a refund")
    server.reply("2", logprobs={"2": -0.3, "1": -1.5, "0": -6.0, "**": -7.0}, when="How urgent")


@pytest.fixture
def jev_env(jev: FakeJevServer, monkeypatch: pytest.MonkeyPatch) -> FakeJevServer:
    """Jev is reachable and keyed, so a stray Jev request would succeed (and be recorded)."""
    monkeypatch.setenv("JEV_BASE_URL", jev.url)
    monkeypatch.setenv("OPENROUTER_API_KEY", jev.api_key)
    return jev


def local_llm(server: FakeOpenAIServer) -> Any:
    return get_llm("local", "fake-gpt", base_url=server.url, api_key=server.api_key)


def test_classify_with_llm_reads_label_logprobs_and_makes_no_jev_request(
    openai_server: FakeOpenAIServer, jev_env: FakeJevServer
) -> None:
    script(openai_server)

    result = classify(STATE, QUESTIONS, llm=local_llm(openai_server))

    category = result.answers["category"]
    assert isinstance(category, ChoiceAnswer)
    p_a, p_b, _ = softmax(-0.2, math.log(math.exp(-2.0) + math.exp(-3.0)), -math.inf)
    assert category.choice == "billing"
    assert category.probabilities == pytest.approx({"billing": p_a, "technical": p_b, "other": 0.0})
    assert sum(category.probabilities.values()) == pytest.approx(1.0)
    assert category.confidence == pytest.approx((p_a - 1 / 3) / (1 - 1 / 3))
    refund = result.answers["refund"]
    assert isinstance(refund, NoulAnswer)
    assert refund.noul == pytest.approx((math.exp(-0.1) + math.exp(-3.5)) / sum(map(math.exp, (-0.1, -3.5, -2.4))))
    urgency = result.answers["urgency"]
    assert isinstance(urgency, ScoreAnswer)
    p0, p1, p2 = softmax(-6.0, -1.5, -0.3)
    assert urgency.probabilities == pytest.approx({0: p0, 1: p1, 2: p2})
    assert sum(urgency.probabilities.values()) == pytest.approx(1.0)
    assert urgency.score == pytest.approx(p1 + 2 * p2)
    assert urgency.confidence == pytest.approx(1 - (2 * p0 + p1) / (2 / 3))
    assert urgency.legend == {0: "Can wait", 1: "Time-sensitive", 2: "Immediately blocking"}
    assert result.model == "fake-gpt-2026-09"  # the model that answered (the first question's reply)
    assert result.usage.input_tokens > 0 and result.usage.output_tokens == 3
    assert result.usage.cost is None

    # One request per question, each asking for one token with its top 20 alternatives; Jev is never asked.
    requests = openai_server.requests
    assert len(requests) == 3
    for request in requests:
        assert request.path == "/v1/chat/completions"
        assert request.body["logprobs"] is True
        assert request.body["top_logprobs"] == 20
        assert request.body["max_completion_tokens"] == 1
        assert "I was charged twice" in request.text
    choice_prompt = next(r.text for r in requests if "Which team" in r.text)
    assert "A. billing: Payments or refunds\nB. technical: Bugs\nC. other\n" in choice_prompt
    assert "Answer with the letter of one option only." in choice_prompt
    score_prompt = next(r.text for r in requests if "How urgent" in r.text)
    assert "0. Can wait\n1. Time-sensitive\n2. Immediately blocking" in score_prompt
    assert jev_env.requests == []

    # The next message gets its own answer from the same model.
    openai_server.reset()
    openai_server.reply("C", logprobs={"C": -0.05, "A": -3.0}, when="Which team")
    openai_server.reply("No", logprobs={"No": -0.05, "Yes": -3.0}, when="request a refund")
    openai_server.reply("0", logprobs={"0": -0.05, "1": -3.0}, when="How urgent")
    again = classify({"message": "What are your opening hours?"}, QUESTIONS, llm=local_llm(openai_server))
    assert again.choices["category"].choice == "other"
    assert again.nouls["refund"].noul < 0.1
    assert again.scores["urgency"].score < 0.1
    assert jev_env.requests == []


async def test_aclassify_with_llm_sends_the_questions_in_parallel_and_fills_the_typed_form(
    openai_server: FakeOpenAIServer, jev_env: FakeJevServer
) -> None:
    script(openai_server)
    arrived = threading.Barrier(3, timeout=5)

    def wait_for_all(body: dict[str, Any]) -> None:
        arrived.wait()  # breaks (and the call fails) unless all three requests are in flight at once
        return None

    openai_server.reply_with(wait_for_all)

    result = await aclassify(STATE, Triage, llm=local_llm(openai_server))

    assert isinstance(result.answers, Triage)
    assert result.answers.category.choice == "billing"
    assert result.answers.refund.noul > 0.8
    assert result.answers.urgency.score > 1.5
    assert sum(result.answers.category.probabilities.values()) == pytest.approx(1.0)
    assert result.answers["urgency"] == result.answers.urgency
    assert len(openai_server.requests) == 3
    assert jev_env.requests == []


def test_langchain_decision_questions_and_labels_jev_would_remap(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply("B", logprobs={"B": -0.1, "A": -2.5}, when="Which plan")
    openai_server.reply("No", logprobs={"No": -0.2, "Yes": -1.7}, when="Is it spam")
    openai_server.reply("1", logprobs={"1": -0.1, "0": -2.5}, when="How angry")
    questions = {
        # Numeric-looking labels travel to Jev under safe keys; here they must come back as themselves.
        "plan": Choice(instructions="Which plan fits?", criteria={"10": "Ten seats", "100": "A hundred seats"}),
        "spam": Noul(instructions="Is it spam?", criteria=NoulCriteria(true="Unsolicited ads", false="A real request")),
        "anger": Score(instructions="How angry is the writer?", criteria=["Calm", "Angry"]),
    }

    result = classify("We need about a hundred seats.", questions, llm=local_llm(openai_server))

    assert result.choices["plan"].choice == "100"
    assert set(result.choices["plan"].probabilities) == {"10", "100"}
    assert result.nouls["spam"].noul == pytest.approx(softmax(-1.7, -0.2)[0])
    assert result.scores["anger"].score == pytest.approx(softmax(-2.5, -0.1)[1])
    spam_prompt = next(r.text for r in openai_server.requests if "Is it spam" in r.text)
    assert "Yes means: Unsolicited ads\nNo means: A real request" in spam_prompt


def test_a_server_without_logprobs_raises_a_user_error_naming_the_model(jev_env: FakeJevServer) -> None:
    with FakeOpenAIServer(logprobs=False) as server:
        llm = get_llm("local", "llama3.2:3b", base_url=server.url, api_key=server.api_key)

        with pytest.raises(UserError, match=r"'llama3\.2:3b' returned no logprobs") as raised:
            classify(STATE, QUESTIONS, llm=llm)

        assert "drop llm=" in str(raised.value)
        assert server.requests[0].body["logprobs"] is True  # it was asked, and ignored it
    assert jev_env.requests == []


async def test_logprobs_without_alternatives_or_labels_are_errors(openai_server: FakeOpenAIServer) -> None:
    llm = local_llm(openai_server)
    question = {"refund": QUESTIONS["refund"]}
    openai_server.reply("Yes", logprobs={"Yes": -0.1}, times=1)  # logprobs, but top_logprobs has one entry

    with pytest.raises(UserError, match="without `top_logprobs` alternatives"):
        await aclassify(STATE, question, llm=llm)

    openai_server.reply("Sure", logprobs={"Sure": -0.1, "Well": -1.0, "I": -2.0})
    with pytest.raises(ModelOutputError, match=r"answered question 'refund' with 'Sure'; none of its top 3 tokens"):
        await aclassify(STATE, question, llm=llm)

    # A broken server (positive log-probabilities) is refused rather than normalised into nonsense.
    openai_server.reply_with(lambda body: {"content": "Yes", "logprobs": {"Yes": 0.7, "No": -1.0}})
    with pytest.raises(ModelOutputError, match=r"sent the log-probability 0\.7 for 'Yes'"):
        await aclassify(STATE, question, llm=llm)


def test_bad_calls_fail_before_any_request(openai_server: FakeOpenAIServer) -> None:
    llm = local_llm(openai_server)

    with pytest.raises(UserError, match="`timeout`, `api_key` .*Jev options"):
        classify(STATE, QUESTIONS, llm=llm, timeout=5, api_key="sk-x")
    many = {"t": {"type": "choice", "instructions": "Which?", "criteria": {f"label{i}": None for i in range(27)}}}
    with pytest.raises(UserError, match="27 labels; with llm= each option is one letter, so at most 26"):
        classify(STATE, many, llm=llm)
    with pytest.raises(UserError, match="has type 'maybe'"):
        classify(STATE, {"x": {"type": "maybe", "instructions": "?"}}, llm=llm)
    with pytest.raises(UserError, match="`state` must be a string"):
        classify(3, QUESTIONS, llm=llm)
    assert openai_server.requests == []


def test_a_question_set_is_checked_once_but_edits_and_types_always_count(openai_server: FakeOpenAIServer) -> None:
    """Checked questions and their prompts are kept per question set, keyed by content and types, never by identity."""
    llm = local_llm(openai_server)
    openai_server.reply("Yes", logprobs={"Yes": -0.1, "No": -2.5})
    questions: dict[str, Any] = {"refund": {"type": "noul", "instructions": {"ask": "Refund?", "weight": 1}}}

    classify(STATE, questions, llm=llm)
    classify(STATE, questions, llm=llm)
    questions["refund"]["instructions"]["weight"] = 1.0  # equal to 1, but the model would see "1.0"
    classify(STATE, questions, llm=llm)
    questions["refund"]["instructions"]["weight"] = True
    classify({"message": "a new state"}, questions, llm=llm)

    prompts = [request.text for request in openai_server.requests]
    assert '"weight": 1}' in prompts[0] and prompts[1] == prompts[0]
    assert '"weight": 1.0}' in prompts[2]
    assert '"weight": true}' in prompts[3] and "a new state" in prompts[3] and "I was charged" not in prompts[3]

    # An edit that makes the set invalid is caught even though the valid content was cached.
    questions["refund"]["type"] = "maybe"
    with pytest.raises(UserError, match="has type 'maybe'"):
        classify(STATE, questions, llm=llm)
    assert len(openai_server.requests) == 4


def test_a_scripted_fake_model_can_carry_logprobs() -> None:
    llm = FakeChatModel([{"logprobs": {"No": -0.3, "Yes": -1.4}}])

    result = classify("Just saying thanks!", {"refund": QUESTIONS["refund"]}, llm=llm)

    assert result.nouls["refund"].noul == pytest.approx(softmax(-1.4, -0.3)[0])
    assert llm.calls[0][-1].text.endswith("Answer Yes or No.")
    with pytest.raises(UserError, match=r"log-probability 0\.5; log-probabilities are <= 0"):
        FakeChatModel([{"logprobs": {"Yes": 0.5}}])


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def test_jev_decision_model_with_llm_runs_langchains_auto_mode_without_jev(
    openai_server: FakeOpenAIServer, jev_env: FakeJevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY")  # no Jev key at all: the llm= model needs none
    openai_server.reply("Yes", logprobs={"Yes": -0.05, "No": -3.0})
    classifier = JevDecisionModel(llm=local_llm(openai_server))
    assert classifier.model == "fake-gpt"  # what LangSmith traces report as ls_model_name

    response = classifier.invoke({"state": "rm -rf /", "questions": {"risky": Noul(instructions="Is it risky?")}})
    assert isinstance(response, ClassifierResponse)
    assert response.nouls["risky"].noul > 0.9

    agent_model = FakeChatModel([{"tool_calls": [{"name": "delete_file", "args": {"path": "/etc"}}]}, "Stopped."])
    auto_mode = AutoModeMiddleware(
        tools=[delete_file], criteria=NoulCriteria(true="Destroys data", false="Harmless"), classifier=classifier
    )
    result = create_agent(model=agent_model, tools=[delete_file], middleware=[auto_mode]).invoke(
        {"messages": [("user", "Delete /etc")]}
    )

    tool_message = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert tool_message.status == "error" and "risky" in str(tool_message.content)
    assert result["messages"][-1].content == "Stopped."
    assert len(openai_server.requests) == 2
    assert "delete_file" in openai_server.requests[1].text
    assert jev_env.requests == []
