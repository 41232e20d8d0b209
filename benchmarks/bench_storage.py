"""Stored bytes of one thread (issue 3 "Storage growth"): our Agent vs create_agent with the same DeltaChannel
state, and vs a plain create_agent (whole history in every checkpoint).

Each turn adds a 1 KB question and a 1 KB answer (2 KB of text; the reference used ~250 KB turns, which makes
the plain anchor hold hundreds of MB). Bytes are the serialized checkpoints, metadata, channel blobs and
pending writes an `InMemorySaver` holds. Storage is deterministic, so it is measured once and reported for
every repeat. The plain anchor runs 100 turns only (its bytes grow with the square of the turns).
"""

from __future__ import annotations

import functools
from typing import Any

from _fixtures import forget_calls, scripted_model, stored_bytes
from _harness import Metric, Session
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils import Agent
from ai_utils._run.state import AgentState

QUESTION = "q" * 1000
ANSWER = "a" * 1000
TURNS = 500
PLAIN_TURNS = 100


def _thread_bytes(kind: str, turns: int) -> int:
    saver = InMemorySaver()
    model = scripted_model(ANSWER)
    if kind == "ours":
        agent = Agent(llm=model, checkpointer=saver)

        def turn() -> Any:
            return agent.invoke(QUESTION, thread_id="t")
    else:
        extra: dict[str, Any] = {"state_schema": AgentState} if kind == "delta" else {}
        graph = create_agent(model, [], checkpointer=saver, **extra)

        def turn() -> Any:
            return graph.invoke({"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": "t"}})

    for _ in range(turns):
        turn()
        forget_calls(model)
    return stored_bytes(saver)


@functools.cache
def _measured(kind: str, turns: int) -> int:
    return _thread_bytes(kind, turns)


def _vs_delta(session: Session) -> tuple[float, float]:
    return _measured("ours", TURNS) / 1e6, _measured("delta", TURNS) / 1e6


def _vs_plain(session: Session) -> tuple[float, float]:
    return _measured("ours", PLAIN_TURNS) / 1e6, _measured("plain", PLAIN_TURNS) / 1e6


def metrics() -> list[Metric]:
    return [
        Metric(
            f"storage after {TURNS} turns: Agent / create_agent(DeltaChannel state), same saver",
            measure=_vs_delta,
            target=1.5,
            unit="MB",
            note="InMemorySaver bytes; 2 KB of text per turn (1 KB question + 1 KB answer), 0 tool steps.",
        ),
        Metric(
            f"storage after {PLAIN_TURNS} turns: Agent / plain create_agent (report)",
            measure=_vs_plain,
            target=None,
            unit="MB",
            note="the plain messages channel stores the whole history in every checkpoint (quadratic growth).",
        ),
    ]
