"""A typed-context agent run in its own interpreter (``python -W error::UserWarning``): see test_context_warnings.

``python _typed_context_proc.py SENTINEL``: `Agent`, `DeepAgent` and a durable session with typed contexts. A
tool is built before ai_utils is imported, the others after; every tool reads the context through a
``runtime: ToolRuntime`` parameter, bare or typed with another type. ``... SENTINEL raw``: the same tool on plain
``create_agent`` without ai_utils (the attack: pydantic's warning quotes the context).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import tempfile
from pathlib import Path

from langchain.tools import ToolRuntime
from langchain_core.tools import tool

SENTINEL = sys.argv[1]


def token_of(context: object) -> str:
    return str(context["api_token"] if isinstance(context, dict) else context.api_token)


@tool
def early_lookup(query: str, runtime: ToolRuntime) -> str:
    """Look something up (built before ai_utils is imported)."""
    return f"token of length {len(token_of(runtime.context))}"


logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)

if sys.argv[2:] == ["raw"]:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from pydantic import BaseModel

    class RawContext(BaseModel):
        api_token: str

    class ToolModel(FakeMessagesListChatModel):
        def bind_tools(self, tools: object, **kwargs: object) -> ToolModel:
            return self

    call = AIMessage("", tool_calls=[{"name": "early_lookup", "args": {"query": "x"}, "id": "c1"}])
    raw = create_agent(ToolModel(responses=[call, AIMessage("done")]), [early_lookup], context_schema=RawContext)
    raw.invoke({"messages": [("user", "hi")]}, context=RawContext(api_token=SENTINEL))
    sys.exit(0)

from pydantic import BaseModel  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

from ai_utils import Agent, DeepAgent, durable_tool  # noqa: E402
from ai_utils.sessions import sqlite_sessions  # noqa: E402
from ai_utils.testing import FakeChatModel  # noqa: E402


class ModelContext(BaseModel):
    api_token: str


@dataclasses.dataclass
class DataContext:
    api_token: str


class DictContext(TypedDict):
    api_token: str


class Other(BaseModel):
    unrelated: int


@tool
def typed_lookup(query: str, runtime: ToolRuntime[Other]) -> str:
    """Look something up (its runtime typed with another context type)."""
    return f"token of length {len(token_of(runtime.context))}"


def calls(*names: str) -> list[object]:
    return [{"tool_calls": [{"name": name, "args": {"query": "x"}} for name in names]}, "done"]


def main() -> None:
    for schema in (ModelContext, DataContext, DictContext):
        given = [{"api_token": SENTINEL}, schema(api_token=SENTINEL)]
        for context in given:
            agent = Agent(
                llm=FakeChatModel(calls("early_lookup", "typed_lookup"), cycle=True),
                tools=[early_lookup, typed_lookup],
                context_schema=schema,
            )
            assert agent.invoke("hi", context=context) == "done"
            assert [c for c in agent.stream("hi", context=context) if isinstance(c, str)] == ["done"]
            assert asyncio.run(agent.ainvoke("hi", context=context)) == "done"
        deep = DeepAgent(
            llm=FakeChatModel(
                [
                    {
                        "tool_calls": [
                            {"name": "ls", "args": {"path": "/"}},
                            {"name": "write_file", "args": {"file_path": "/notes.txt", "content": "hello"}},
                        ]
                    },
                    "done",
                ],
                cycle=True,
            ),
            context_schema=schema,
            checkpointer=False,
        )
        assert deep.invoke("hi", context=given[1]) == "done"
        with tempfile.TemporaryDirectory() as folder:
            store = sqlite_sessions(Path(folder) / "sessions.db")
            durable = Agent(
                llm=FakeChatModel(calls("early_lookup"), cycle=True),
                tools=[durable_tool(early_lookup, idempotent=True)],
                context_schema=schema,
                sessions=store,
            )
            session = durable.session(context=given[1])
            session.prompt("hi")
            lines = list(session.stream(0))
            assert lines[-1]["chunk"]["stop_reason"] == "end_turn", lines[-1]
            store.close()
    print("all runs done")


if __name__ == "__main__":
    main()
