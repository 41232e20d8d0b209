"""A 3-step governed loop (LoopRunner) vs the same steps hand-written as a LangGraph StateGraph.

Both run the same scripted model and tool on an InMemorySaver with ``durability="sync"``, a fresh thread
per sample: triage (a `create_agent` subgraph with structured output) -> a routed tool call -> answer
(a `create_agent` subgraph). Ours adds the permission check, CEL routing, context bindings, the pending
approval check before the run, the result projection and the run's record in its run store (the default
in-memory one; the second row records every run in a SQLite file: started, sealed for steering, finished).
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

from _harness import Metric
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel
from typing_extensions import TypedDict

from ai_utils import (
    LoopRunner,
    agent_step,
    ctx,
    define_loop,
    otherwise,
    permission,
    sqlite_loop_runs,
    tool_step,
    when,
)
from ai_utils._run.state import AgentState
from ai_utils.testing import FakeChatModel


class Triage(BaseModel):
    needs_refund: bool
    category: str


@tool
def issue_refund(order_id: str, reason: str) -> dict[str, str]:
    """Refund an order."""
    return {"refund_id": f"R-{order_id}", "reason": reason}


REPLIES: list[Any] = [
    {"tool_calls": [{"name": "Triage", "args": {"needs_refund": True, "category": "billing"}}]},
    "Your refund is on its way.",
]
REQUEST = {"request": {"order_id": "A-1", "text": "Please refund my order."}}


def _loop() -> Any:
    return define_loop(
        "bench",
        start="triage",
        steps={
            "triage": agent_step(
                prompt="Classify the request.",
                output=Triage,
                next=[when("triage.needs_refund == true", "refund"), otherwise("answer")],
            ),
            "refund": tool_step(
                "issue_refund", input={"order_id": ctx("request.order_id"), "reason": "customer"}, next="answer"
            ),
            "answer": agent_step(prompt="Answer the customer.", next="end"),
        },
        permissions=[
            permission("refunds", resource="tool", action="call", effect="allow", match={"tool": "issue_refund"})
        ],
        result={"data": ctx("refund"), "presentation": {"text": ctx("answer.text")}},
    )


class _State(TypedDict, total=False):
    context: dict[str, Any]


def _hand_written(model: FakeChatModel) -> Any:
    triage = create_agent(
        model, [], system_prompt="Classify the request.", response_format=Triage, state_schema=AgentState
    )
    answer = create_agent(model, [], system_prompt="Answer the customer.", state_schema=AgentState)

    async def triage_node(state: _State) -> _State:
        out = await triage.ainvoke({"messages": [HumanMessage(str(state["context"]))]})
        return {"context": {**state["context"], "triage": out["structured_response"].model_dump()}}

    async def refund_node(state: _State) -> _State:
        request = state["context"]["request"]
        result = await issue_refund.ainvoke({"order_id": request["order_id"], "reason": "customer"})
        return {"context": {**state["context"], "refund": result}}

    async def answer_node(state: _State) -> _State:
        out = await answer.ainvoke({"messages": [HumanMessage(str(state["context"]))]})
        return {"context": {**state["context"], "answer": {"text": out["messages"][-1].text}}}

    builder = StateGraph(_State)
    builder.add_node("triage", triage_node)
    builder.add_node("refund", refund_node)
    builder.add_node("answer", answer_node)
    builder.add_edge(START, "triage")
    builder.add_conditional_edges(
        "triage", lambda s: "refund" if s["context"]["triage"]["needs_refund"] else "answer", ["refund", "answer"]
    )
    builder.add_edge("refund", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=InMemorySaver())


def metrics() -> list[Metric]:
    runner = LoopRunner(
        _loop(), llm=FakeChatModel(REPLIES, cycle=True), tools=[issue_refund], checkpointer=InMemorySaver()
    )
    folder = Path(tempfile.mkdtemp(prefix="bench-loops-"))
    recorded = LoopRunner(
        _loop(),
        llm=FakeChatModel(REPLIES, cycle=True),
        tools=[issue_refund],
        checkpointer=InMemorySaver(),
        run_store=sqlite_loop_runs(folder / "runs.db"),
    )
    graph = _hand_written(FakeChatModel(REPLIES, cycle=True))
    ids = itertools.count()

    async def ours() -> None:
        out = await runner.ainvoke(REQUEST, thread_id=f"o{next(ids)}")
        assert out.presentation == {"text": "Your refund is on its way."}  # type: ignore[union-attr]

    async def ours_recorded() -> None:
        out = await recorded.ainvoke(REQUEST, thread_id=f"s{next(ids)}")
        assert out.presentation == {"text": "Your refund is on its way."}  # type: ignore[union-attr]

    async def anchor() -> None:
        out = await graph.ainvoke(
            {"context": REQUEST}, {"configurable": {"thread_id": f"a{next(ids)}"}}, durability="sync"
        )
        assert out["context"]["answer"]["text"] == "Your refund is on its way."

    return [
        Metric(
            "LoopRunner.ainvoke (3 steps) / hand-written StateGraph of the same steps",
            ours,
            anchor,
            target=1.15,
            note="triage (create_agent, structured output) -> tool call -> answer (create_agent); InMemorySaver, "
            "durability='sync', a new thread per run; ours adds permissions, CEL routing, bindings, result projection.",
        ),
        Metric(
            "LoopRunner.ainvoke (3 steps, run store on SQLite) / hand-written StateGraph of the same steps",
            ours_recorded,
            anchor,
            target=1.15,
            note="as above, and every run recorded in sqlite_loop_runs (a row written at the start; at the last "
            "boundary one statement seals the steering queue and records the run completed).",
        ),
    ]
