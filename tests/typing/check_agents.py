"""Type-checker test for the generic wrappers: run through mypy --strict by tests/agents/test_agent_typing.py."""

from __future__ import annotations

from typing import assert_type

from langgraph.checkpoint.memory import MemorySaver
from langgraph.store.memory import InMemoryStore
from pydantic import BaseModel

from ai_utils import (
    ActionRegistry,
    Agent,
    AgentRun,
    AgentTraceEvent,
    DeepAgent,
    create_state_backend,
    define_action,
    workspace_permissions,
)
from ai_utils.client import InterruptBatch, InterruptEvent, StreamChunk, is_interrupt
from ai_utils.gateway.actions import DirectiveResult
from ai_utils.testing import FakeChatModel

Interrupt = InterruptEvent | InterruptBatch


class Weather(BaseModel):
    city: str
    celsius: float


model = FakeChatModel(["Sunny."])
registry = ActionRegistry([define_action(id="ticket.summarize", description="Summarize.", risk="safe")])

# Agent: the answer type follows `output` / `actions`; an interrupt is always possible.
assert_type(Agent(llm=model), Agent[str])
assert_type(Agent(llm=model).invoke("hi"), str | Interrupt)
assert_type(Agent(llm=model, output=Weather), Agent[Weather])
assert_type(Agent(llm=model, output=Weather).invoke("hi"), Weather | Interrupt)
assert_type(
    Agent(llm=model, checkpointer=MemorySaver(), output=Weather).invoke(thread_id="t", decision="approve"),
    Weather | Interrupt,
)
assert_type(Agent(llm=model, actions=registry), Agent[DirectiveResult])
assert_type(Agent(llm=model, actions=registry).invoke("hi", actor={"user_id": "u1"}), DirectiveResult | Interrupt)

# DeepAgent: the same for `output`; its options take deepagents' own types.
assert_type(DeepAgent(llm=model), DeepAgent[str])
assert_type(DeepAgent(llm=model).invoke("hi", thread_id="t"), str | Interrupt)
assert_type(DeepAgent(llm=model, output=Weather).invoke("hi", thread_id="t"), Weather | Interrupt)
deep = DeepAgent(
    llm=model,
    output=Weather,
    backend=create_state_backend(),
    permissions=workspace_permissions("/workspace/"),
    subagents=[{"name": "researcher", "description": "Finds facts.", "system_prompt": "Be brief."}],
    skills=["/skills/"],
    store=InMemoryStore(),
    checkpointer=False,
)
assert_type(deep, DeepAgent[Weather])

# Every option keeps its name and type through the overloads (`**options: Unpack[AgentOptions]`), run options too.
full = Agent(
    llm=model,
    prompt="Be brief.",
    tools=[],
    checkpointer=MemorySaver(),
    interrupt_on={"send_mail": True},
    max_iterations=3,
    decide_followup_tool_choice=lambda iteration, messages: "auto",
    tool_errors="raise",
    parallel_tools=False,
    on_trace=lambda event: None,
    durability="async",
    retries=1,
    name="helper",
    middleware=[],
    output=Weather,
)
assert_type(full, Agent[Weather])
assert_type(full.invoke("hi", thread_id="t", context=None, config={"tags": ["x"]}, actor=None), Weather | Interrupt)
assert_type(list(full.stream("hi", thread_id="t", show_tool_calls=True, callbacks=[])), list[StreamChunk])
assert_type(DeepAgent(llm=model, store=InMemoryStore(), retries=0, agents_md=["/AGENTS.md"]), DeepAgent[str])

# `details=True` answers the run record around the same answer type; `allowed_tools` and `trace_id` are run options.
assert_type(Agent(llm=model).invoke("hi", details=True), AgentRun[str] | Interrupt)
assert_type(
    full.invoke("hi", thread_id="t", details=True, allowed_tools=["x"], trace_id="t1"), AgentRun[Weather] | Interrupt
)
assert_type(Agent(llm=model, actions=registry).invoke("hi", details=True), AgentRun[DirectiveResult] | Interrupt)
assert_type(DeepAgent(llm=model).invoke("hi", thread_id="t", details=True), AgentRun[str] | Interrupt)
assert_type(DeepAgent(llm=model, tool_errors="raise", parallel_tools=True, on_trace=print), DeepAgent[str])


def sink(event: AgentTraceEvent) -> None:
    assert_type(event.trace_id, str)


Agent(llm=model, on_trace=sink)


async def async_twins() -> None:
    assert_type(await Agent(llm=model).ainvoke("hi"), str | Interrupt)
    assert_type(await Agent(llm=model, output=Weather).ainvoke("hi"), Weather | Interrupt)
    assert_type(await Agent(llm=model, actions=registry).ainvoke("hi"), DirectiveResult | Interrupt)
    assert_type(await DeepAgent(llm=model).ainvoke("hi", thread_id="t"), str | Interrupt)
    assert_type(await deep.ainvoke("hi", thread_id="t"), Weather | Interrupt)
    assert_type(await Agent(llm=model).ainvoke("hi", details=True), AgentRun[str] | Interrupt)
    assert_type(await deep.ainvoke("hi", thread_id="t", details=True), AgentRun[Weather] | Interrupt)


def temperature(agent: Agent[Weather]) -> float:
    result = agent.invoke("Weather in Berlin?")
    if is_interrupt(result):  # a TypeIs: both branches are narrowed
        assert_type(result, Interrupt)
        return float("nan")
    assert_type(result, Weather)
    return result.celsius


def any_agent(agent: Agent, deep_agent: DeepAgent) -> None:
    # A bare annotation takes every agent (the answer type is covariant) and names all it may answer.
    assert_type(agent.invoke("hi"), str | BaseModel | DirectiveResult | Interrupt)
    assert_type(deep_agent.invoke("hi"), str | BaseModel | Interrupt)


temperature(Agent(llm=model, output=Weather))
any_agent(Agent(llm=model, output=Weather), DeepAgent(llm=model, output=Weather))
any_agent(Agent(llm=model, actions=registry), DeepAgent(llm=model))

# Prompts: a list of str (both wrappers), a function of the run's inputs (Agent); actions: max_actions, actor.
assert_type(DeepAgent(llm=model, prompt=["Be brief.", "Answer in German."]), DeepAgent[str])
assert_type(Agent(llm=model, prompt=["Be brief."]), Agent[str])
assert_type(Agent(llm=model, prompt=lambda inputs: f"Help {inputs['actor']}."), Agent[str])
actions_agent = Agent(llm=model, actions=registry, max_actions=2)
assert_type(actions_agent, Agent[DirectiveResult])
for streamed in actions_agent.stream("hi", actor={"user_id": "u1"}, show_tool_calls=True):
    assert_type(streamed, StreamChunk)
