"""LangChain conventions pass through `Agent` and `DeepAgent`: ``config=``, ``get_state*``, stream writers,
``llm="provider:model"``, ``tools=registry``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.config import get_stream_writer
from langgraph.errors import GraphRecursionError
from pydantic import BaseModel

from ai_utils import Agent, DeepAgent, ToolRegistry, sqlite_saver
from ai_utils.client import is_custom_event
from ai_utils.testing import FakeChatModel


class RootRun(BaseCallbackHandler):
    def __init__(self) -> None:
        self.roots: list[dict[str, Any]] = []

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if parent_run_id is None:
            self.roots.append({"name": kwargs.get("name"), "tags": tags, "metadata": metadata})


seen_config: list[dict[str, Any]] = []


@tool
def where(config: RunnableConfig) -> str:
    """Say which tenant asked."""
    seen_config.append(dict(config.get("configurable") or {}))
    return "ok"


def looping_model() -> FakeChatModel:
    return FakeChatModel([{"tool_calls": [{"name": "where", "args": {}}]}] * 10 + ["done"])


@pytest.mark.parametrize("kind", ["agent", "deep"])
def test_invoke_and_stream_merge_the_callers_config(kind: str, tmp_path: Path) -> None:
    seen_config.clear()
    handler = RootRun()
    llm = FakeChatModel([{"tool_calls": [{"name": "where", "args": {}}]}, "done", "again"])
    with sqlite_saver(tmp_path / "c.sqlite") as saver:
        agent: Agent | DeepAgent = (
            Agent(llm=llm, tools=[where], checkpointer=saver)
            if kind == "agent"
            else DeepAgent(llm=llm, tools=[where], checkpointer=saver)
        )
        config: RunnableConfig = {
            "tags": ["support"],
            "metadata": {"ticket": 7},
            "run_name": "support-turn",
            "callbacks": [handler],
            "configurable": {"thread_id": "from-config", "tenant": "acme"},
        }
        assert agent.invoke("hi", config=config) == "done"
        assert list(agent.stream("more", config=config)) == ["again"]

        root = handler.roots[0]
        assert root["name"] == "support-turn"
        assert "support" in root["tags"] and root["metadata"]["ticket"] == 7
        assert seen_config[0]["tenant"] == "acme" and seen_config[0]["thread_id"] == "from-config"
        # the thread came from config["configurable"]["thread_id"] and keeps both turns
        assert len(agent.get_state("from-config").values["messages"]) >= 5


def test_recursion_limit_from_config_wins() -> None:
    agent = Agent(llm=looping_model(), tools=[where])
    with pytest.raises(GraphRecursionError):
        agent.invoke("loop", config={"recursion_limit": 3})


@pytest.mark.parametrize("kind", ["agent", "deep"])
async def test_get_state_and_history(kind: str, tmp_path: Path) -> None:
    llm = FakeChatModel(["first", "second"])
    with sqlite_saver(tmp_path / "s.sqlite") as saver:
        agent: Agent | DeepAgent = (
            Agent(llm=llm, checkpointer=saver) if kind == "agent" else DeepAgent(llm=llm, checkpointer=saver)
        )
        await agent.ainvoke("one", thread_id="t")
        await agent.ainvoke("two", thread_id="t")
        state = await agent.aget_state("t")
        assert [m.text for m in state.values["messages"]][-1] == "second"
        assert agent.get_state({"configurable": {"thread_id": "t"}}).values == state.values
        history = list(agent.get_state_history("t"))
        assert history[0].config == state.config and len(history) > 2
        older = agent.get_state(history[-2].config)
        assert len(older.values.get("messages", [])) < len(state.values["messages"])
        assert [s.config async for s in agent.aget_state_history("t", limit=2)] == [h.config for h in history[:2]]


@tool
def progress(step: str) -> str:
    """Report progress while working."""
    writer = get_stream_writer()
    writer({"progress": step, "pct": 50})
    return "working"


@pytest.mark.parametrize("kind", ["agent", "deep"])
async def test_stream_writer_events_reach_the_stream(kind: str) -> None:
    llm = FakeChatModel([{"tool_calls": [{"name": "progress", "args": {"step": "fetch"}}]}, "fertig"])
    agent: Agent | DeepAgent = (
        Agent(llm=llm, tools=[progress]) if kind == "agent" else DeepAgent(llm=llm, tools=[progress])
    )
    thread = {"thread_id": "w"} if kind == "deep" else {}
    chunks = [c async for c in agent.astream("go", **thread)]
    custom = [c for c in chunks if is_custom_event(c)]
    assert custom == [{"kind": "custom", "data": {"progress": "fetch", "pct": 50}}]
    assert chunks[-1] == "fertig"


def test_llm_as_provider_model_string(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    agent = Agent(llm="local:qwen3:4b")
    deep = DeepAgent(llm="local:qwen3:4b")
    for llm in (agent.llm, deep.llm):
        assert getattr(llm, "model_name", None) == "qwen3:4b"
        assert str(getattr(llm, "openai_api_base", "")) == "http://127.0.0.1:9/v1"


class Sum(BaseModel):
    a: int
    b: int


def test_a_tool_registry_is_accepted_as_tools() -> None:
    registry = ToolRegistry([{"name": "add", "description": "Add.", "schema": Sum, "func": lambda a, b: a + b}])
    llm = FakeChatModel([{"tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]}, "5"])
    agent = Agent(llm=llm, tools=registry)
    assert [t.name for t in agent.tools] == ["add"]
    assert agent.invoke("2+3?") == "5"
    assert DeepAgent(llm=FakeChatModel(["x"]), tools=registry).tools[0].name == "add"


def test_get_state_without_a_checkpointer_says_what_to_do() -> None:
    from ai_utils import UserError

    with pytest.raises(UserError, match="get_state read the thread from a checkpointer"):
        Agent(llm=FakeChatModel(["x"])).get_state("t")
