"""Writing tools run alone (SPEC §19): the calls of one reply keep its order, reads overlap, a writer overlaps nothing.

Each tool records when it ran (timestamps taken inside the tool). Reads prove they overlap with a barrier: each
waits until the other read of its group has started, which only works when both run at once. Nothing here
sleeps or compares durations.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel

from ai_utils import Agent, ToolRegistry, durable_tool
from ai_utils.testing import FakeChatModel

WAIT = 60.0  # generous: a barrier only times out when the reads were (wrongly) run one after the other


class Spans:
    """Start and end of every call, by key, taken inside the tools."""

    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def record(self, key: str, start: float) -> None:
        with self._lock:
            self.spans[key] = (start, time.perf_counter())

    def before(self, first: str, second: str) -> bool:
        return self.spans[first][1] <= self.spans[second][0]


def reply(*calls: tuple[str, str]) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": name, "args": {"key": key}} for name, key in calls]}


# The reply: two reads, a writer, two more reads. Reads a+b and d+e meet at a barrier of two.
REPLY = reply(("read", "a"), ("read", "b"), ("write", "c"), ("read", "d"), ("read", "e"))
GROUP = {"a": 0, "b": 0, "d": 1, "e": 1}


def sync_tools(spans: Spans) -> tuple[Callable[..., str], Callable[..., str]]:
    barriers = [threading.Barrier(2, timeout=WAIT), threading.Barrier(2, timeout=WAIT)]

    def read(key: str) -> str:
        """Read a record."""
        start = time.perf_counter()
        barriers[GROUP[key]].wait()
        spans.record(key, start)
        return f"read {key}"

    def write(key: str) -> str:
        """Write a record."""
        start = time.perf_counter()
        spans.record(key, start)
        return f"wrote {key}"

    return read, write


def async_tools(spans: Spans) -> tuple[Callable[..., Any], Callable[..., Any]]:
    barriers = [asyncio.Barrier(2), asyncio.Barrier(2)]

    async def read(key: str) -> str:
        """Read a record."""
        start = time.perf_counter()
        await asyncio.wait_for(barriers[GROUP[key]].wait(), WAIT)
        spans.record(key, start)
        return f"read {key}"

    async def write(key: str) -> str:
        """Write a record."""
        start = time.perf_counter()
        await asyncio.sleep(0)  # hand the loop to anything that could (wrongly) run now
        spans.record(key, start)
        return f"wrote {key}"

    return read, write


def assert_writer_alone(spans: Spans, llm: FakeChatModel) -> None:
    results = [m for m in llm.calls[1] if isinstance(m, ToolMessage)]
    assert [m.status for m in results] == ["success"] * 5, [m.text for m in results]
    assert [m.text for m in results] == ["read a", "read b", "wrote c", "read d", "read e"]  # reply order
    # The writer starts after both earlier reads ended and ends before either later read starts.
    assert spans.before("a", "c") and spans.before("b", "c")
    assert spans.before("c", "d") and spans.before("c", "e")


def as_writer(func: Callable[..., Any], how: str) -> BaseTool:
    if how == "durable_tool":
        return durable_tool(func, idempotent=False, writes=True)
    if how == "metadata":
        tool = StructuredTool.from_function(func) if not asyncio.iscoroutinefunction(func) else None
        tool = tool or StructuredTool.from_function(coroutine=func)
        tool.metadata = {"writes": True}
        return tool

    class Key(BaseModel):
        key: str

    registry = ToolRegistry([{"name": "write", "description": "Write.", "schema": Key, "func": func, "writes": True}])
    return registry.get_tool("write")


@pytest.mark.parametrize("how", ["durable_tool", "metadata", "registry"])
def test_sync_reads_overlap_and_a_writer_runs_alone_in_reply_order(how: str) -> None:
    spans = Spans()
    read, write = sync_tools(spans)
    llm = FakeChatModel([REPLY, "done"])
    assert Agent(llm=llm, tools=[read, as_writer(write, how)]).invoke("go") == "done"
    assert_writer_alone(spans, llm)


async def test_async_reads_overlap_and_a_writer_runs_alone_in_reply_order() -> None:
    spans = Spans()
    read, write = async_tools(spans)
    llm = FakeChatModel([REPLY, "done"])
    assert await Agent(llm=llm, tools=[read, as_writer(write, "durable_tool")]).ainvoke("go") == "done"
    assert_writer_alone(spans, llm)


async def test_sync_tools_in_an_async_run_keep_the_order_too() -> None:
    spans = Spans()
    read, write = sync_tools(spans)
    llm = FakeChatModel([REPLY, "done"])
    chunks = [c async for c in Agent(llm=llm, tools=[read, as_writer(write, "metadata")]).astream("go")]
    assert "".join(c for c in chunks if isinstance(c, str)) == "done"
    assert_writer_alone(spans, llm)


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_parallel_tools_false_runs_every_call_alone_in_reply_order(run: str) -> None:
    spans = Spans()

    def step(key: str) -> str:
        """One step."""
        spans.record(key, time.perf_counter())
        return key

    keys = ["a", "b", "c", "d"]
    llm = FakeChatModel([reply(*(("step", k) for k in keys)), "done"])
    agent = Agent(llm=llm, tools=[step], parallel_tools=False)
    if run == "sync":
        agent.invoke("go")
    else:
        await agent.ainvoke("go")
    assert all(spans.before(first, second) for first, second in zip(keys, keys[1:], strict=False))


def test_a_failing_call_still_lets_the_calls_after_it_run() -> None:
    ran: list[str] = []

    def step(key: str) -> str:
        """One step."""
        ran.append(key)
        if key == "a":
            raise RuntimeError("first step failed")
        return key

    llm = FakeChatModel([reply(("step", "a"), ("step", "b")), "done"])
    assert Agent(llm=llm, tools=[step], parallel_tools=False).invoke("go") == "done"
    assert ran == ["a", "b"]
    assert [m.status for m in llm.calls[1] if isinstance(m, ToolMessage)] == ["error", "success"]


CRASH = """
import json, os, sqlite3, sys, time
from ai_utils import Agent, durable_tool
from ai_utils.memory import sqlite_saver
from ai_utils.testing import FakeChatModel

db, log, crash = sys.argv[1], sys.argv[2], sys.argv[3] == "crash"

def note(what):
    with open(log, "a") as f:
        f.write(what + "\\n")

def read(key: str) -> str:
    '''Read a record.'''
    note("read " + key)
    return "read " + key

def save(key: str) -> str:
    '''Save a record.'''
    note("save " + key)
    if crash:
        # LangGraph stores a finished call's result in the background: wait (bounded) until the read's is stored,
        # then die inside the writer.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with sqlite3.connect(db) as c:
                (latest,) = c.execute("select max(checkpoint_id) from checkpoints where thread_id = 't'").fetchone()
                query = "select count(*) from writes where thread_id = 't' and checkpoint_id = ?"
                if c.execute(query, (latest,)).fetchone()[0]:
                    break
            time.sleep(0.05)
        os._exit(3)
    return "saved " + key

calls = [{"name": "read", "args": {"key": "a"}}, {"name": "save", "args": {"key": "b"}}]
llm = FakeChatModel([{"tool_calls": calls}, "done"] if crash else ["done"])
with sqlite_saver(db) as saver:
    agent = Agent(llm=llm, tools=[read, durable_tool(save, idempotent=False, writes=True)], checkpointer=saver)
    result = agent.invoke("go" if crash else None, thread_id="t")
    print(json.dumps({"result": result, "seen": [m.text for m in llm.calls[-1] if m.type == "tool"]}))
"""


def test_a_step_continued_after_a_crash_does_not_wait_for_a_call_that_finished_before_it(tmp_path: Any) -> None:
    import json
    import subprocess
    import sys

    db, log = str(tmp_path / "t.sqlite"), str(tmp_path / "calls.log")
    first = subprocess.run([sys.executable, "-c", CRASH, db, log, "crash"], capture_output=True, text=True, timeout=120)
    assert first.returncode == 3, first.stderr
    second = subprocess.run([sys.executable, "-c", CRASH, db, log, "go"], capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    out = json.loads(second.stdout.strip().splitlines()[-1])
    assert out == {"result": "done", "seen": ["read a", "saved b"]}
    # The read finished before the crash: its stored result is used, and the writer did not wait for it.
    assert (tmp_path / "calls.log").read_text().split("\n")[:-1] == ["read a", "save b", "save b"]
    assert "never started" not in second.stderr
