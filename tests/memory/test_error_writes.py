"""A failed run never stores its exception's text in our savers (non-negotiable "Secrets stay secret", issue #24).

LangGraph keeps a failed task's exception as a pending write (``__error__``). A tool error that quotes the run's
``context`` or a provider error that quotes the API key would land raw in the checkpoint; each test shows that
attack on LangGraph's own saver first, then that none of our savers stores it (every table and row is read back),
and that the thread is still continued with ``invoke(thread_id=...)`` once the cause is fixed.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from ai_utils import Agent, SmartCheckpointSaver, postgres_saver, sqlite_saver
from ai_utils.testing import FakeChatModel, FunctionChatModel


@dataclass
class Creds:
    api_token: str


@dataclass
class Secrets:
    token: str  # the context value a tool error quotes
    key: str  # the API key a provider error quotes


@pytest.fixture
def secrets() -> Secrets:
    """Fresh values per test, so a row another test left in a shared database never counts."""
    hexes = uuid.uuid4().hex
    return Secrets(token=f"tok-alice-{hexes[:16]}", key="sk-proj-" + hexes * 2)


@dataclass
class Backend:
    saver: Any
    stored: Callable[[], str]  # every value of every table (or store) the saver writes to, as text


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _sqlite_rows(path: Path) -> str:
    with closing(sqlite3.connect(path)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        # Table names from sqlite_master itself.
        return "\n".join(_text(v) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"') for v in row)


def _postgres_rows(uri: str) -> str:
    with psycopg.connect(uri, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
        out = []
        for schema, table in tables:  # names from the catalog itself
            out.extend(_text(v) for row in conn.execute(f'SELECT * FROM "{schema}"."{table}"') for v in row)
    return "\n".join(out)


@pytest.fixture(params=["sqlite", "postgres", "smart", "supabase"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        with sqlite_saver(tmp_path / "c.sqlite") as saver:
            yield Backend(saver, lambda: _sqlite_rows(tmp_path / "c.sqlite"))
    elif request.param == "postgres":
        uri: str = request.getfixturevalue("postgres_db")
        with postgres_saver(uri) as saver:
            yield Backend(saver, lambda: _postgres_rows(uri))
    elif request.param == "smart":
        # Over LangGraph's in-memory saver: our own filter is all that stands between the error and the store.
        inner = InMemorySaver()
        smart = SmartCheckpointSaver(inner, llm=FakeChatModel(["summary"]))
        yield Backend(smart, lambda: repr((inner.storage, inner.writes, inner.blobs)))
    else:
        tables = request.getfixturevalue("supabase_checkpoints")  # the shipped tables behind real PostgREST
        yield Backend(tables.fresh_saver(), lambda: _postgres_rows(tables.stack.db_uri))


def _tool_failing_agent(saver: Any, broken: list[bool]) -> Agent[Any]:
    def lookup(query: str, runtime: ToolRuntime[Creds]) -> str:
        """Look the query up in the customer database."""
        if broken:
            raise RuntimeError(f"db down for {runtime.context.api_token}")
        return "found it"

    llm = FakeChatModel([{"tool_calls": [{"name": "lookup", "args": {"query": "q"}}]}, "all done"])
    return Agent(llm=llm, tools=[lookup], checkpointer=saver, tool_errors="raise", context_schema=Creds)


def _model_failing_agent(saver: Any, broken: list[bool], key: str) -> Agent[Any]:
    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        if broken:
            raise RuntimeError(f"Error code: 401 - Incorrect API key provided: {key}")
        return "all done"

    return Agent(llm=FunctionChatModel(reply), checkpointer=saver)


def test_langgraphs_own_saver_stores_the_raw_error_text_the_attack(tmp_path: Path, secrets: Secrets) -> None:
    conn = sqlite3.connect(tmp_path / "raw.sqlite", check_same_thread=False)
    agent = _tool_failing_agent(SqliteSaver(conn), [True])
    with pytest.raises(RuntimeError, match="db down"):
        agent.invoke("look it up", thread_id="t1", context=Creds(secrets.token))
    conn.close()
    assert secrets.token in _sqlite_rows(tmp_path / "raw.sqlite")  # what our savers must refuse


def test_a_tool_error_quoting_the_context_is_stored_as_its_class_name_and_the_thread_continues(
    backend: Backend, secrets: Secrets
) -> None:
    broken = [True]
    agent = _tool_failing_agent(backend.saver, broken)
    with pytest.raises(RuntimeError, match="db down for tok-alice"):  # the caller gets the full error
        agent.invoke("look it up", thread_id="t1", context=Creds(secrets.token))
    (task,) = agent.get_state("t1").tasks
    assert str(task.error).startswith("RuntimeError")  # get_state still names what failed
    assert secrets.token not in str(task.error)
    assert secrets.token not in backend.stored()

    broken.clear()  # the database is back
    assert agent.invoke(thread_id="t1", context=Creds(secrets.token)) == "all done"
    messages = agent.get_state("t1").values["messages"]
    assert [m.content for m in messages if isinstance(m, ToolMessage)] == ["found it"]
    assert secrets.token not in backend.stored()


async def test_a_model_error_quoting_the_key_is_stored_as_its_class_name_and_the_thread_continues(
    backend: Backend, secrets: Secrets
) -> None:
    broken = [True]
    agent = _model_failing_agent(backend.saver, broken, secrets.key)
    with pytest.raises(RuntimeError, match="Incorrect API key"):
        await agent.ainvoke("hello", thread_id="t2")
    (task,) = (await agent.aget_state("t2")).tasks
    assert str(task.error).startswith("RuntimeError") and secrets.key not in str(task.error)
    assert secrets.key not in backend.stored()

    broken.clear()  # a valid key is configured
    assert await agent.ainvoke(thread_id="t2") == "all done"
    assert secrets.key not in backend.stored()
