"""Gateway/audit callbacks on an agent turn (performance.md metric 1 with gateway callbacks, §9.4).

Turn tax: ``Agent.ainvoke(prompt, callbacks=[gateway.callback(...)])`` vs raw ``create_agent(...).ainvoke`` on
the same zero-latency model, the same ``add`` tool and an `InMemorySaver` thread pre-filled to H ∈ {10, 100}
messages and restored (untimed) before every sample, as in bench_agent. The gateway audits into a
`SqliteAuditSink` on a temporary file (report-only rows use `MemoryAuditSink`); every row is written before the
call returns.

Time to first chunk: ``Agent.astream`` with the gateway callbacks vs the same Agent without them, so the ratio
shows what the handler adds before the first text chunk (the audit write belongs after the stream, not before).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _fixtures import PLAIN_PROMPT, TOOL_PROMPT, ThreadStack, add, forget_calls, scripted_model, turn_metric
from _harness import Metric, Session
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from ai_utils import Agent
from ai_utils.gateway import Gateway, MemoryAuditSink, Route, SqliteAuditSink
from ai_utils.gateway.audit import AuditSink

THREAD = "bench"
HISTORIES = (10, 100)
FEATURE = "support"
ACTOR = {"user_id": "u1"}

_tmp: Path | None = None


def _db_path() -> Path:
    global _tmp
    if _tmp is None:
        _tmp = Path(tempfile.mkdtemp(prefix="bench_gateway_"))
        atexit.register(shutil.rmtree, _tmp, True)
    return _tmp / "audit.sqlite"


def _gateway(sink: str) -> tuple[Gateway, AuditSink]:
    audit: AuditSink = SqliteAuditSink(_db_path()) if sink == "sqlite" else MemoryAuditSink()
    return Gateway(routes=[Route(FEATURE, "fake", "m")], audit=audit), audit


class Stack(ThreadStack):
    """``raw`` create_agent, or a ``sqlite``/``memory`` Agent with gateway callbacks, on its own saver."""

    def __init__(self, kind: str, history: int) -> None:
        super().__init__(history)
        self.audit: AuditSink | None = None
        if kind == "raw":
            graph = create_agent(self.model, [add], checkpointer=self.saver)
            config: Any = {"configurable": {"thread_id": THREAD}, "recursion_limit": 200}
            self.run = lambda prompt: graph.ainvoke({"messages": [HumanMessage(prompt)]}, config)
            return
        gateway, self.audit = _gateway(kind)
        handler = gateway.callback(FEATURE, actor=ACTOR)
        agent = Agent(llm=self.model, tools=[add], checkpointer=self.saver)
        self.run = lambda prompt: agent.ainvoke(prompt, thread_id=THREAD, callbacks=[handler])

    async def reset(self) -> None:
        """Untimed: back to the pre-filled thread, and no in-memory audit rows kept from earlier samples."""
        await super().reset()
        if isinstance(self.audit, MemoryAuditSink):
            self.audit.entries.clear()


@functools.cache
def stack(kind: str, history: int) -> Stack:
    """One stack per kind and history, shared by the metrics of this module."""
    return Stack(kind, history)


def _ttfc(session: Session) -> tuple[float, float]:
    model = scripted_model()
    gateway, _ = _gateway("sqlite")
    handler = gateway.callback(FEATURE, actor=ACTOR)
    agent = Agent(llm=model, tools=[add])

    def first(callbacks: list[Any]) -> Callable[[], Awaitable[float]]:
        async def sample() -> float:
            start = time.perf_counter()
            stream: Any = agent.astream(PLAIN_PROMPT, callbacks=callbacks)
            first_chunk = await anext(stream)
            elapsed = time.perf_counter() - start
            assert isinstance(first_chunk, str), first_chunk
            await stream.aclose()
            return elapsed

        return sample

    def reset() -> None:
        forget_calls(model)

    m = session.medians(
        {"ours": first([handler]), "anchor": first([])}, {"ours": reset, "anchor": reset}, self_timed=True
    )
    return m["ours"] * 1e6, m["anchor"] * 1e6


def metrics() -> list[Metric]:
    out: list[Metric] = []
    for steps, prompt in ((0, PLAIN_PROMPT), (1, TOOL_PROMPT)):
        for h in HISTORIES:
            out.append(
                turn_metric(
                    f"gateway: Agent.ainvoke+callbacks (SQLite audit) / create_agent.ainvoke (steps={steps}, H={h})",
                    stack("sqlite", h),
                    stack("raw", h),
                    prompt,
                    1.20,
                    f"same FunctionChatModel, `add` tool, InMemorySaver thread of {h} messages; ours: Agent "
                    "defaults + `gateway.callback('support', actor=...)` auditing each model call into a "
                    "SqliteAuditSink (temp file, WAL, row committed before the call returns); anchor: create_agent.",
                )
            )
    for steps, prompt in ((0, PLAIN_PROMPT), (1, TOOL_PROMPT)):
        out.append(
            turn_metric(
                f"gateway: Agent.ainvoke+callbacks (memory audit) / create_agent.ainvoke (steps={steps}, H=10)",
                stack("memory", 10),
                stack("raw", 10),
                prompt,
                None,
                "as the SQLite rows, with a MemoryAuditSink: handler plus LangChain callback cost, no storage.",
            )
        )
    out.append(
        Metric(
            "gateway: time to first chunk Agent.astream with / without gateway callbacks (SQLite audit)",
            measure=_ttfc,
            target=1.10,
            unit="µs",
            note="same Agent and model, no checkpointer; from the call to the first text chunk, stream closed "
            "afterwards (untimed). Policy runs before the call; hashing and the audit write come at the end.",
        )
    )
    return out
