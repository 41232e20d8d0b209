"""JevDecisionModel as a LangChain decision model, inside real create_agent runs with LangChain middleware."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AutoModeMiddleware, ModelChoice, ModelRouterMiddleware
from langchain_core.decisions import BaseDecisionModel, Choice, ClassifierResponse, Noul, NoulCriteria, Score
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from ai_utils.exceptions import UserError
from ai_utils.jev import JevAPIError, JevDecisionModel
from ai_utils.testing import FakeChatModel
from ai_utils.testing.jev_server import FakeJevServer

QUESTIONS = {
    "refund": Noul(instructions="Does the message ask for a refund?"),
    "team": Choice(instructions="Which team?", criteria={"billing": "Money", "tech": "Bugs"}),
    "urgency": Score(instructions="How urgent?", criteria=["Low", "Medium", "High"]),
}


def decision_model(jev: FakeJevServer, **kwargs: Any) -> JevDecisionModel:
    return JevDecisionModel(base_url=jev.url, api_key=jev.api_key, **kwargs)


def test_invoke_returns_a_langchain_classifier_response(jev: FakeJevServer) -> None:
    jev.answer("refund", noul=0.93)
    jev.answer("team", choice="billing")
    jev.answer("urgency", score=1.5)
    model = decision_model(jev, model="typesafe/jev-1.13")

    response = model.invoke({"state": "Refund my double charge!", "questions": QUESTIONS})

    assert isinstance(model, BaseDecisionModel)
    assert isinstance(response, ClassifierResponse)
    assert response.nouls["refund"].noul == 0.93
    assert response.choices["team"].choice == "billing"
    assert response.choices["team"].probabilities == {"billing": 0.9, "tech": 0.1}
    assert response.scores["urgency"].score == 1.5
    assert response.scores["urgency"].legend == {0: "Low", 1: "Medium", 2: "High"}
    assert response.scores["urgency"].probabilities == {0: 0.0, 1: 0.5, 2: 0.5}
    assert response.model == "typesafe/jev-1.13-20260917"
    assert response.request_id is not None and response.request_id.startswith("gen-dec-")
    assert response.usage is not None
    assert response.usage["total_tokens"] == response.usage["input_tokens"] + response.usage["output_tokens"]
    assert jev.requests[0].body["model"] == "typesafe/jev-1.13"


async def test_ainvoke_returns_the_same_answers(jev: FakeJevServer) -> None:
    jev.answer("refund", noul=0.4)

    response = await decision_model(jev).ainvoke({"state": {"message": "hi"}, "questions": QUESTIONS})

    assert response.nouls["refund"].noul == 0.4
    assert len(jev.requests) == 1


def test_api_errors_surface_as_jev_api_errors(jev: FakeJevServer) -> None:
    jev.fail(403, body={"error": {"code": 403, "message": "Flagged by moderation"}})

    with pytest.raises(JevAPIError, match="Flagged by moderation"):
        decision_model(jev).invoke({"state": "x", "questions": QUESTIONS})


def test_a_missing_key_fails_at_construction_and_the_key_never_shows() -> None:
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        JevDecisionModel()

    model = JevDecisionModel(api_key="sk-or-top-secret")

    assert "sk-or-top-secret" not in repr(model)
    assert "sk-or-top-secret" not in str(model)
    assert "sk-or-top-secret" not in model.model_dump_json()


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


DELETED: list[str] = []


def agent_with_auto_mode(jev: FakeJevServer) -> Any:
    model = FakeChatModel(
        [{"tool_calls": [{"name": "delete_file", "args": {"path": "/etc/passwd"}}]}, "Done, as far as allowed."]
    )
    auto_mode = AutoModeMiddleware(
        tools=[delete_file],
        criteria=NoulCriteria(true="Destroys data", false="Harmless"),
        classifier=decision_model(jev),
    )
    return create_agent(model=model, tools=[delete_file], middleware=[auto_mode])


def test_auto_mode_blocks_a_tool_call_jev_finds_risky(jev: FakeJevServer) -> None:
    DELETED.clear()
    jev.answer("is_risky", noul=0.92)

    result = agent_with_auto_mode(jev).invoke({"messages": [("user", "Delete /etc/passwd")]})

    tool_message = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert tool_message.status == "error"
    assert "classified as risky (probability: 0.92)" in str(tool_message.content)
    assert DELETED == []
    (request,) = jev.requests
    question = request.body["questions"]["is_risky"]
    assert question["type"] == "noul"
    assert question["criteria"] == {"true": "Destroys data", "false": "Harmless"}
    state = request.body["state"]
    assert state["tool_call"]["name"] == "delete_file"
    assert state["tool_call"]["args"] == {"path": "/etc/passwd"}
    assert state["tool_description"] == "Delete a file."
    assert state["messages"][0] == {"role": "user", "content": "Delete /etc/passwd"}


async def test_auto_mode_lets_a_harmless_tool_call_run_in_async_agents(jev: FakeJevServer) -> None:
    DELETED.clear()
    jev.answer("is_risky", noul=0.05)

    result = await agent_with_auto_mode(jev).ainvoke({"messages": [("user", "Delete my temp file")]})

    tool_message = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert tool_message.content == "deleted /etc/passwd"
    assert DELETED == ["/etc/passwd"]
    assert result["messages"][-1].content == "Done, as far as allowed."
    assert len(jev.requests) == 1


@pytest.mark.filterwarnings("ignore:The middleware `ModelRouterMiddleware` is in beta")
def test_model_router_sends_the_turn_to_the_model_jev_chooses(jev: FakeJevServer) -> None:
    fast = FakeChatModel(["fast answer"])
    strong = FakeChatModel(["careful answer"])
    router = ModelRouterMiddleware(
        choices={
            "fast": ModelChoice(model=fast, criteria="Small talk and simple questions"),
            "strong": ModelChoice(model=strong, criteria="Hard reasoning"),
        },
        instructions="Which model should answer the latest message?",
        classifier=decision_model(jev),
    )
    jev.answer("model_route", choice="strong")

    result = create_agent(model=fast, middleware=[router]).invoke({"messages": [("user", "Prove Fermat")]})

    assert result["messages"][-1].content == "careful answer"
    assert fast.calls == [] and len(strong.calls) == 1
    assert jev.requests[0].body["state"] == {"role": "user", "content": "Prove Fermat"}
