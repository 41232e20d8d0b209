"""Agent.ainvoke vs raw `create_agent(...).ainvoke` (performance.md metrics 1 and 2).

Same zero-latency model, the same ``add`` tool and an `InMemorySaver` on both sides. Every sample starts
from the same pre-filled thread: the saver is restored (untimed) to a copy taken after the thread was
built turn by turn, so a thread of H messages stays H messages for every sample. Our Agent keeps its
defaults (messages on a `DeltaChannel`, ``durability="sync"``); the anchor is plain ``create_agent``
(default state and durability). Report-only rows split the difference into those two choices.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from _fixtures import PLAIN_PROMPT, REPORT_ROUNDS, TOOL_PROMPT, ThreadStack, add, turn_metric
from _harness import Metric, Session
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.types import Durability

from ai_utils import Agent, durable_tool
from ai_utils._run.state import AgentState
from ai_utils.testing import FunctionChatModel

THREAD = "bench"
GUARD_MS = 40.0


class Stack(ThreadStack):
    """``ours`` (Agent defaults) or a raw create_agent variant (``raw``, ``raw_sync``, ``delta``, ``delta_sync``)."""

    def __init__(self, kind: str, history: int) -> None:
        super().__init__(history)
        if kind == "ours":
            agent = Agent(llm=self.model, tools=[add], checkpointer=self.saver)
            self.run = lambda prompt: agent.ainvoke(prompt, thread_id=THREAD)
            return
        durability: Durability | None = "sync" if "sync" in kind else None
        extra: dict[str, Any] = {"state_schema": AgentState} if "delta" in kind else {}
        graph = create_agent(self.model, [add], checkpointer=self.saver, **extra)
        config: Any = {"configurable": {"thread_id": THREAD}, "recursion_limit": 200}
        self.run = lambda prompt: graph.ainvoke({"messages": [HumanMessage(prompt)]}, config, durability=durability)


@tool("add")
def failing_add(a: int, b: int) -> int:
    """Add two integers."""
    raise RuntimeError("the calculator backend is down")


@tool("add")
def error_text_add(a: int, b: int) -> str:
    """Add two integers."""
    return "RuntimeError: the calculator backend is down"


@tool
def read(key: str) -> str:
    """Read a record."""
    return f"value of {key}"


def _write(key: str) -> str:
    """Write a record."""
    return "written"


write = durable_tool(_write, idempotent=False, writes=True)

READS = "read three"


def _reads_model() -> FunctionChatModel:
    """One reply calling ``read`` three times for ``read three``, a short answer after the results."""

    def answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return "Read them."
        if isinstance(last, HumanMessage) and last.text == READS:
            return {"tool_calls": [{"name": "read", "args": {"key": k}} for k in "abc"]}
        return "ok"

    return FunctionChatModel(answer)


class ToolStack(ThreadStack):
    """An Agent for the tool-loop rows: ``raising`` / ``error_text`` tools, or three reads with (``ordered``) or
    without (``unordered``) the writer bookkeeping of the tool loop."""

    def __init__(self, kind: str, history: int) -> None:
        super().__init__(history)
        if kind in ("raising", "error_text"):
            tools = [failing_add if kind == "raising" else error_text_add]
            agent = Agent(llm=self.model, tools=tools, checkpointer=self.saver)
        else:
            self.model = _reads_model()
            agent = Agent(llm=self.model, tools=[read, write], checkpointer=self.saver)
            if kind == "unordered":
                # The anchor: the same middleware with the ordering gate off (no reply scan, no writes lookup).
                loop = agent._tool_loop
                loop.options = dataclasses.replace(loop.options, ordered=False)
        self.run = lambda prompt: agent.ainvoke(prompt, thread_id=THREAD)


@functools.cache
def tool_stack(kind: str, history: int) -> ToolStack:
    """One tool-loop stack per kind and history."""
    return ToolStack(kind, history)


@functools.cache
def stack(kind: str, history: int) -> Stack:
    """One stack per kind and history, shared by the metrics of this module."""
    return Stack(kind, history)


def _slope(session: Session) -> tuple[float, float]:
    names = {"ours": "ours", "anchor": "raw"}
    samples: dict[str, Any] = {}
    setups: dict[str, Any] = {}
    for label, kind in names.items():
        for h in (100, 1000):
            s = stack(kind, h)
            samples[f"{label}{h}"] = s.turn(PLAIN_PROMPT)
            setups[f"{label}{h}"] = s.reset
    m = session.medians(samples, setups)
    # µs per added history message, per turn.
    return ((m["ours1000"] - m["ours100"]) / 900 * 1e6, (m["anchor1000"] - m["anchor100"]) / 900 * 1e6)


def _guard(session: Session) -> tuple[float, float]:
    s = stack("ours", 1000)
    m = session.medians({"ours": s.turn(PLAIN_PROMPT)}, {"ours": s.reset})
    return m["ours"] * 1e3, GUARD_MS


def metrics() -> list[Metric]:
    out: list[Metric] = []
    for steps, prompt in ((0, PLAIN_PROMPT), (1, TOOL_PROMPT)):
        for h in (10, 100):
            out.append(
                turn_metric(
                    f"Agent.ainvoke / create_agent.ainvoke (steps={steps}, H={h})",
                    stack("ours", h),
                    stack("raw", h),
                    prompt,
                    1.10,
                    "same FunctionChatModel, `add` tool, InMemorySaver; ours: DeltaChannel state + durability='sync' "
                    "(defaults); anchor: create_agent defaults.",
                )
            )
    for steps, prompt in ((0, PLAIN_PROMPT), (1, TOOL_PROMPT)):
        out.append(
            turn_metric(
                f"Agent.ainvoke / create_agent(DeltaChannel state, durability='sync') (steps={steps}, H=100)",
                stack("ours", 100),
                stack("delta_sync", 100),
                prompt,
                None,
                "our wrapper alone: the anchor uses the same state schema and durability as the Agent.",
            )
        )
        out.append(
            turn_metric(
                f"create_agent(durability='sync') / create_agent (steps={steps}, H=100)",
                stack("raw_sync", 100),
                stack("raw", 100),
                prompt,
                None,
                "cost of durability='sync' alone (plain messages channel on both sides).",
            )
        )
        out.append(
            turn_metric(
                f"create_agent(DeltaChannel state) / create_agent (steps={steps}, H=100)",
                stack("delta", 100),
                stack("raw", 100),
                prompt,
                None,
                "cost of the DeltaChannel messages state alone (default durability on both sides).",
            )
        )
    out.append(
        turn_metric(
            "Agent turn, raising tool / the same turn with a tool returning the error text (H=10)",
            tool_stack("raising", 10),
            tool_stack("error_text", 10),
            TOOL_PROMPT,
            1.05,
            "SPEC §19: a tool's exception becomes the model's failed result (class: message, context values and "
            "secret shapes redacted, cut to 2,000 chars); the anchor's tool returns that text itself.",
        )
    )
    out.append(
        turn_metric(
            "Agent turn, 3 read-tool calls: tool loop with / without the writer-ordering bookkeeping (H=10)",
            tool_stack("ordered", 10),
            tool_stack("unordered", 10),
            READS,
            1.02,
            "SPEC §19 writers alone: the agent has a writer tool; the reply calls only readers, so the gate "
            "finds nothing to order (one reply scan, a writes lookup, then a dict hit per further call).",
        )
    )
    out.append(
        Metric(
            "history slope: Agent / create_agent+InMemorySaver [t(H=1000) - t(H=100)]",
            measure=_slope,
            target=1.10,
            unit="µs/msg",
            note="slope in µs per history message per turn (steps=0); both threads built turn by turn.",
        )
    )
    out.append(
        Metric(
            "guard: Agent.ainvoke at H=1000 (async, InMemorySaver) / 40 ms",
            measure=_guard,
            target=1.0,
            unit="ms",
            rounds=REPORT_ROUNDS,
            note="absolute guard: the H=1000 turn stays under 40 ms.",
        )
    )
    return out
