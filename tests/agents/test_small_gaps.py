"""Small correctness gaps: a seed-style action policy, a plain interrupt's options, RAG sources for citing."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import interrupt

from ai_utils import (
    ActionRegistry,
    Agent,
    DeepAgent,
    MemorySaver,
    UserError,
    create_rag_tool,
    create_ram_vector_store,
    define_action,
)
from ai_utils.client import is_interrupt
from ai_utils.testing import FakeChatModel

REPLY = 'Erledigt.\n!> refund {"order": "A1"}\n!> open_ticket {}'


def seed_policy(context: Any) -> dict[str, Any]:
    """The seed's policy shape: a plain mapping."""
    if context.action.id == "refund" and (context.actor is None or context.actor.plan != "pro"):
        return {"status": "blocked", "reason": "Refunds need the pro plan."}
    return {"status": "allowed"}


def registry(policy: Any) -> ActionRegistry:
    return ActionRegistry(
        [
            define_action(id="refund", description="Refund an order.", risk="confirm"),
            define_action(id="open_ticket", description="Open a ticket.", risk="safe"),
        ],
        policy=policy,
    )


def test_a_policy_returning_the_seed_mapping_works_through_the_agent() -> None:
    agent = Agent(llm=FakeChatModel([REPLY, REPLY]), actions=registry(seed_policy))
    free = agent.invoke("Geld zurück", actor={"user_id": "u1", "plan": "free"})
    assert {a.id: (a.status, a.reason) for a in free.actions} == {
        "refund": ("blocked", "Refunds need the pro plan."),
        "open_ticket": ("allowed", None),
    }
    pro = agent.invoke("Geld zurück", actor={"user_id": "u2", "plan": "pro"})
    assert [a.status for a in pro.actions] == ["allowed", "allowed"]


@pytest.mark.parametrize("bad", [None, "allowed", {"status": "maybe"}, {"status": "allowed", "reason": 3}])
def test_anything_else_from_a_policy_is_a_clear_error(bad: Any) -> None:
    agent = Agent(llm=FakeChatModel([REPLY]), actions=registry(lambda context: bad))
    with pytest.raises(UserError, match="action policy returned"):
        agent.invoke("Geld zurück")


@tool
def pick_plan() -> str:
    """Ask the human which plan to book."""
    choice = interrupt({"question": "Welcher Tarif?", "options": ["basic", "pro"]})
    return f"booked {choice}"


@pytest.mark.parametrize("cls", [Agent, DeepAgent])
def test_a_plain_interrupt_keeps_its_options_and_resumes_with_the_choice(cls: type[Any]) -> None:
    llm = FakeChatModel([{"tool_calls": [{"name": "pick_plan", "args": {}}]}, "Gebucht."])
    agent = cls(llm=llm, tools=[pick_plan], checkpointer=MemorySaver())

    paused = agent.invoke("Buch mir was", thread_id="t")
    assert is_interrupt(paused)
    assert paused["question"] == "Welcher Tarif?" and paused["options"] == ["basic", "pro"]
    assert agent.pending("t") == paused  # also after a page reload
    streamed_again = [c for c in agent.stream(thread_id="t", decision="pro")]
    assert streamed_again[-1] == "Gebucht."
    tool_results = [m for m in llm.calls[1] if isinstance(m, ToolMessage)]
    assert tool_results[-1].text == "booked pro"


def test_the_rag_tool_lets_the_agent_cite_the_source() -> None:
    store = create_ram_vector_store(
        [{"page_content": "Urlaub zwei Wochen vorher beantragen.", "metadata": {"source": "handbuch.pdf"}}],
        embeddings=DeterministicFakeEmbedding(size=8),
    )
    search = create_rag_tool(vector_store=store, name="search", description="Handbuch", k=1)
    llm = FakeChatModel([{"tool_calls": [{"name": "search", "args": {"query": "Urlaub"}}]}, "Laut handbuch.pdf ..."])
    Agent(llm=llm, tools=[search]).invoke("Wann Urlaub beantragen?")
    (result,) = [m for m in llm.calls[1] if isinstance(m, ToolMessage)]
    assert result.text == "[source: handbuch.pdf]\nUrlaub zwei Wochen vorher beantragen."
