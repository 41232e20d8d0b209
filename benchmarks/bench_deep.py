"""DeepAgent.ainvoke vs raw `create_deep_agent(...).ainvoke` (performance.md metric 1 for deep agents, §9.7).

Turn tax: the same zero-latency model, the same ``add`` tool and an `InMemorySaver` on both sides, the thread
pre-filled to H messages and restored (untimed) before every sample, as in bench_agent. Our DeepAgent keeps its
defaults (planning via ``write_todos``, state backend, ``durability="sync"``); the anchor is ``create_deep_agent``
with the same planning middleware (deepagents leaves it out by default) and its default durability.

Graph builds: deepagents takes 13-19 ms to build a graph, so a run must never build one, also not with MCP
servers (their tools are routed to each run's session). The guard counts the graphs a DeepAgent with an MCP
server used over its runs; report rows show the build time and the whole per-run MCP cost.

Approval round trip: a run that pauses on ``write_file`` plus the run that approves it, vs the same two calls on
the raw graph (``Command(resume=...)``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from _fixtures import (
    PLAIN_PROMPT,
    REPORT_ROUNDS,
    TOOL_PROMPT,
    ThreadStack,
    add,
    forget_calls,
    restore,
    scripted_model,
    snapshot,
    turn_metric,
)
from _harness import Metric, Session
from bench_mcp import _http_url
from deepagents import create_deep_agent
from langchain.agents.middleware import TodoListMiddleware
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ai_utils import DeepAgent, MCPServer
from ai_utils.testing import FunctionChatModel

THREAD = "bench"
WRITE_PROMPT = "write the notes"
RUNS_WITH_MCP = 20


class Stack(ThreadStack):
    """``ours`` (DeepAgent defaults), ``raw`` (create_deep_agent with planning) or ``bare`` (without)."""

    def __init__(self, kind: str, history: int) -> None:
        super().__init__(history)
        if kind == "ours":
            agent = DeepAgent(llm=self.model, tools=[add], checkpointer=self.saver)
            self.run = lambda prompt: agent.ainvoke(prompt, thread_id=THREAD)
            return
        middleware = [TodoListMiddleware()] if kind == "raw" else []
        graph = create_deep_agent(model=self.model, tools=[add], checkpointer=self.saver, middleware=middleware)
        config: Any = {"configurable": {"thread_id": THREAD}, "recursion_limit": 200}
        self.run = lambda prompt: graph.ainvoke({"messages": [HumanMessage(prompt)]}, config)


@functools.cache
def stack(kind: str, history: int) -> Stack:
    """One stack per kind and history, shared by the metrics of this module."""
    return Stack(kind, history)


def _writer() -> FunctionChatModel:
    """A model that writes /notes.txt for ``write ...`` prompts and answers after the tool result."""

    def answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        if isinstance(messages[-1], ToolMessage):
            return "Written."
        return {"tool_calls": [{"name": "write_file", "args": {"file_path": "/notes.txt", "content": "hello"}}]}

    return FunctionChatModel(answer)


def _approval_metric() -> Metric:
    gate = {"write_file": {"decisions": ["approve", "reject"]}}
    ours_saver, raw_saver = InMemorySaver(), InMemorySaver()
    ours_model, raw_model = _writer(), _writer()
    agent = DeepAgent(llm=ours_model, checkpointer=ours_saver, interrupt_on=gate)
    graph = create_deep_agent(
        model=raw_model,
        checkpointer=raw_saver,
        middleware=[TodoListMiddleware()],
        interrupt_on={"write_file": {"allowed_decisions": ["approve", "reject"]}},
    )
    config: Any = {"configurable": {"thread_id": THREAD}, "recursion_limit": 200}
    empty = snapshot(InMemorySaver())

    async def ours() -> None:
        paused = await agent.ainvoke(WRITE_PROMPT, thread_id=THREAD)
        assert isinstance(paused, dict) and paused["kind"] == "interrupt", paused
        assert await agent.ainvoke(thread_id=THREAD, decision="approve") == "Written."

    async def raw() -> None:
        paused = await graph.ainvoke({"messages": [HumanMessage(WRITE_PROMPT)]}, config)
        assert paused["__interrupt__"], paused
        done = await graph.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
        assert done["messages"][-1].text == "Written."

    def clear(saver: InMemorySaver, model: FunctionChatModel) -> Callable[[], None]:
        def setup() -> None:
            restore(saver, empty)
            forget_calls(model)

        return setup

    return Metric(
        "DeepAgent approval round trip (interrupt on write_file, then approve) / the same on create_deep_agent",
        ours,
        raw,
        None,
        ours_setup=clear(ours_saver, ours_model),
        anchor_setup=clear(raw_saver, raw_model),
        rounds=REPORT_ROUNDS,
        note="two calls each (pause, resume), fresh thread per sample, state backend; ours resumes with "
        "decision='approve', the anchor with Command(resume={'decisions': [{'type': 'approve'}]}).",
    )


def _mcp_agents() -> tuple[DeepAgent, DeepAgent]:
    with_mcp = DeepAgent(llm=scripted_model(), checkpointer=None, mcp_server=MCPServer("everything", _http_url()))
    return with_mcp, DeepAgent(llm=scripted_model(), checkpointer=None)


def _graph_builds(session: Session) -> tuple[float, float]:
    agent, _ = _mcp_agents()
    graphs: list[Any] = []

    async def run() -> None:
        assert await agent.ainvoke(PLAIN_PROMPT)

    for _ in range(RUNS_WITH_MCP):
        session.run(run)
        if not any(graph is agent.graph for graph in graphs):
            graphs.append(agent.graph)
    return float(len(graphs)), 1.0


def _build_time(session: Session) -> tuple[float, float]:
    model = scripted_model()

    def build() -> None:
        create_deep_agent(model=model, tools=[add], middleware=[TodoListMiddleware()])

    with_mcp, without = _mcp_agents()

    async def run_with() -> None:
        assert await with_mcp.ainvoke(PLAIN_PROMPT)

    async def run_without() -> None:
        assert await without.ainvoke(PLAIN_PROMPT)

    m = session.medians({"build": build, "with": run_with, "without": run_without})
    return (m["with"] - m["without"]) * 1e3, m["build"] * 1e3


def metrics() -> list[Metric]:
    out: list[Metric] = []
    for steps, prompt in ((0, PLAIN_PROMPT), (1, TOOL_PROMPT)):
        for h in (10, 100):
            out.append(
                turn_metric(
                    f"DeepAgent.ainvoke / create_deep_agent.ainvoke (steps={steps}, H={h})",
                    stack("ours", h),
                    stack("raw", h),
                    prompt,
                    1.10,
                    "same FunctionChatModel, `add` tool, InMemorySaver and planning middleware; ours: DeepAgent "
                    "defaults (durability='sync'); anchor: create_deep_agent(middleware=[TodoListMiddleware()]).",
                )
            )
    out.append(
        turn_metric(
            "DeepAgent.ainvoke / create_deep_agent without planning (steps=0, H=10, report)",
            stack("ours", 10),
            stack("bare", 10),
            PLAIN_PROMPT,
            None,
            "what planning on by default costs: the anchor has no TodoListMiddleware.",
        )
    )
    out.append(
        Metric(
            f"guard: graphs built for {RUNS_WITH_MCP} DeepAgent.ainvoke runs with an MCP server (HTTP) / 1",
            measure=_graph_builds,
            target=1.0,
            unit="graphs",
            note="distinct graphs the agent ran over its runs; the first run builds the graph with the server's "
            "tools, later runs route their calls to their own session.",
        )
    )
    out.append(
        Metric(
            "per-run MCP cost of a DeepAgent (with - without an MCP server) / one create_deep_agent build (report)",
            measure=_build_time,
            target=None,
            unit="ms",
            rounds=REPORT_ROUNDS,
            note="server-everything over streamable HTTP; the per-run cost is the session open/close, which a "
            "graph rebuild per run would add to.",
        )
    )
    out.append(_approval_metric())
    return out
