"""Governance overhead: an `Agent` turn with ``guardrails("standard")`` vs the same Agent without it.

Also ``guardrails("standard", mode="audit")`` (every decision made and reported, nothing changed: a rollout's first
step) against the same plain Agent.

Same zero-latency model, the same ``add`` tool and an `InMemorySaver` thread pre-filled to H messages (built turn
by turn through each stack, so the guarded stack has scanned them once, as a live thread has), restored untimed
before every sample. steps=1: the turn makes one ``add`` call, so it runs both model-call and tool-call policies.

Slope: [t(H=1000) - t(H=10)] / 990 per stack; the ratio shows whether the guardrail cost grows with history (the
engine scans only messages newer than the last one it has seen, so it should not). The wide span keeps the
difference of medians well above the noise of a shared machine (at H=200 it is ~2 ms, about the noise).

The loop helper adds its LoopRunner rows in ``bench_loops.py``.
"""

from __future__ import annotations

import functools
from typing import Any

from _fixtures import TOOL_PROMPT, ThreadStack, add, turn_metric
from _harness import Metric, Session

from ai_utils import Agent, guardrails

THREAD = "bench"
HISTORIES = (10, 200)
SLOPE_HISTORIES = (10, 1000)


class Stack(ThreadStack):
    """``guarded`` (Agent + guardrails("standard")), ``audited`` (the same, audit mode) or ``plain`` (no middleware)."""

    def __init__(self, kind: str, history: int) -> None:
        super().__init__(history)
        middleware: list[Any] = []
        if kind == "guarded":
            middleware = [guardrails("standard")]
        elif kind == "audited":
            middleware = [guardrails("standard", mode="audit")]
        agent = Agent(llm=self.model, tools=[add], checkpointer=self.saver, middleware=middleware)
        self.run = lambda prompt: agent.ainvoke(prompt, thread_id=THREAD)


@functools.cache
def stack(kind: str, history: int) -> Stack:
    """One stack per kind and history, shared by the metrics of this module."""
    return Stack(kind, history)


def _slope(session: Session) -> tuple[float, float]:
    samples: dict[str, Any] = {}
    setups: dict[str, Any] = {}
    for kind in ("guarded", "plain"):
        for h in SLOPE_HISTORIES:
            s = stack(kind, h)
            samples[f"{kind}{h}"] = s.turn(TOOL_PROMPT)
            setups[f"{kind}{h}"] = s.reset
    m = session.medians(samples, setups)
    low, high = SLOPE_HISTORIES
    span = high - low
    return (
        (m[f"guarded{high}"] - m[f"guarded{low}"]) / span * 1e6,
        (m[f"plain{high}"] - m[f"plain{low}"]) / span * 1e6,
    )


def metrics() -> list[Metric]:
    out = [
        turn_metric(
            f"Agent.ainvoke + guardrails('standard') / Agent.ainvoke (steps=1, H={h})",
            stack("guarded", h),
            stack("plain", h),
            TOOL_PROMPT,
            1.10,
            "same FunctionChatModel, `add` tool, InMemorySaver thread; the turn runs input, tool-input, "
            "tool-output and output policies once each.",
        )
        for h in HISTORIES
    ]
    out.append(
        turn_metric(
            "Agent.ainvoke + guardrails('standard', mode='audit') / Agent.ainvoke (steps=1, H=10)",
            stack("audited", 10),
            stack("plain", 10),
            TOOL_PROMPT,
            1.05,
            "audit mode decides and reports every policy but changes nothing (no copies, no state updates).",
        )
    )
    out.append(
        Metric(
            "history slope: Agent + guardrails / Agent [t(H=1000) - t(H=10)] (steps=1)",
            measure=_slope,
            target=1.05,
            unit="µs/msg",
            note="µs per history message per turn; the guardrail cost must not grow with the thread.",
        )
    )
    return out
