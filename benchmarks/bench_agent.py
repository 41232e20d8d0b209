"""Agent.ainvoke vs raw `create_agent(...).ainvoke` (performance.md metrics 1 and 2).

Same zero-latency model, the same ``add`` tool and an `InMemorySaver` on both sides. Every sample starts
from the same pre-filled thread: the saver is restored (untimed) to a copy taken after the thread was
built turn by turn, so a thread of H messages stays H messages for every sample. Our Agent keeps its
defaults (messages on a `DeltaChannel`, ``durability="sync"``); the anchor is plain ``create_agent``
(default state and durability). Report-only rows split the difference into those two choices.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from _fixtures import PLAIN_PROMPT, TOOL_PROMPT, add, forget_calls, restore, scripted_model, snapshot
from _harness import Metric, Session
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Durability

from ai_utils import Agent
from ai_utils.agents._state import AgentState

THREAD = "bench"
GUARD_MS = 40.0
REPORT_ROUNDS = 15


class Stack:
    """One agent stack on its own saver, with a thread pre-filled (lazily) to ``history`` messages."""

    def __init__(self, kind: str, history: int) -> None:
        self.kind = kind
        self.history = history
        self.saver = InMemorySaver()
        self.model = scripted_model()
        self._state: Any = None
        self.run: Callable[[str], Awaitable[Any]]
        if kind == "ours":
            agent = Agent(llm=self.model, tools=[add], checkpointer=self.saver)
            self.run = lambda prompt: agent.ainvoke(prompt, thread_id=THREAD)
            return
        durability: Durability | None = "sync" if "sync" in kind else None
        extra: dict[str, Any] = {"state_schema": AgentState} if "delta" in kind else {}
        graph = create_agent(self.model, [add], checkpointer=self.saver, **extra)
        config: Any = {"configurable": {"thread_id": THREAD}, "recursion_limit": 200}
        self.run = lambda prompt: graph.ainvoke({"messages": [HumanMessage(prompt)]}, config, durability=durability)

    async def reset(self) -> None:
        """Untimed: back to the pre-filled thread (built on first use, one turn = 2 messages)."""
        if self._state is None:
            for _ in range(self.history // 2):
                await self.run(PLAIN_PROMPT)
            self._state = snapshot(self.saver)
        restore(self.saver, self._state)
        forget_calls(self.model)

    def turn(self, prompt: str) -> Callable[[], Awaitable[Any]]:
        async def sample() -> None:
            await self.run(prompt)

        return sample


_stacks: dict[tuple[str, int], Stack] = {}


def stack(kind: str, history: int) -> Stack:
    key = (kind, history)
    if key not in _stacks:
        _stacks[key] = Stack(kind, history)
    return _stacks[key]


def _pair(name: str, ours: Stack, anchor: Stack, prompt: str, target: float | None, note: str) -> Metric:
    return Metric(
        name,
        ours.turn(prompt),
        anchor.turn(prompt),
        target,
        note=note,
        ours_setup=ours.reset,
        anchor_setup=anchor.reset,
        # Report-only rows get fewer rounds: the untimed full gc.collect() per sample dominates the budget.
        rounds=None if target is not None else REPORT_ROUNDS,
    )


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
                _pair(
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
            _pair(
                f"Agent.ainvoke / create_agent(DeltaChannel state, durability='sync') (steps={steps}, H=100)",
                stack("ours", 100),
                stack("delta_sync", 100),
                prompt,
                None,
                "our wrapper alone: the anchor uses the same state schema and durability as the Agent.",
            )
        )
        out.append(
            _pair(
                f"create_agent(durability='sync') / create_agent (steps={steps}, H=100)",
                stack("raw_sync", 100),
                stack("raw", 100),
                prompt,
                None,
                "cost of durability='sync' alone (plain messages channel on both sides).",
            )
        )
        out.append(
            _pair(
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
