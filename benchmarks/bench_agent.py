"""Agent.ainvoke vs raw `create_agent(...).ainvoke` (performance.md metrics 1 and 2).

Same zero-latency model, the same ``add`` tool and an `InMemorySaver` on both sides. Every sample starts
from the same pre-filled thread: the saver is restored (untimed) to a copy taken after the thread was
built turn by turn, so a thread of H messages stays H messages for every sample. Our Agent keeps its
defaults (messages on a `DeltaChannel`, ``durability="sync"``); the anchor is plain ``create_agent``
(default state and durability). Report-only rows split the difference into those two choices.
"""

from __future__ import annotations

import functools
from typing import Any

from _fixtures import PLAIN_PROMPT, REPORT_ROUNDS, TOOL_PROMPT, ThreadStack, add, turn_metric
from _harness import Metric, Session
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.types import Durability

from ai_utils import Agent
from ai_utils._run.state import AgentState

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
