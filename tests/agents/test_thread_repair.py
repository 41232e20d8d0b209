"""Threads never brick: crash inside a tool, a new message while an approval waits, concurrent runs.

The crash tests kill a real process inside a tool (``os._exit``) while `Agent` / `DeepAgent` run on a
`sqlite_saver`, then a new process continues the thread, and the model (which records every call) must
never see an unanswered tool call.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    ToolMessageChunk,
)
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils import Agent, DeepAgent, UserError
from ai_utils._run.repair import repair_messages, unanswered_calls
from ai_utils.client import is_interrupt, is_tool_event
from ai_utils.testing import FakeChatModel, FunctionChatModel

PROC = Path(__file__).parent / "_crash_proc.py"


def _run(**args: Any) -> tuple[int, dict[str, Any] | None]:
    done = subprocess.run(
        [sys.executable, str(PROC), json.dumps(args)], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        return done.returncode, None
    return 0, json.loads(done.stdout.strip().splitlines()[-1])


def _sound(messages: list[BaseMessage]) -> bool:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return all(c["id"] in answered for m in messages if isinstance(m, AIMessage) for c in m.tool_calls)


@pytest.mark.parametrize("kind", ["agent", "deep"])
@pytest.mark.parametrize("method", ["invoke", "stream"])
def test_after_a_crash_inside_a_tool_a_new_process_continues_the_run(kind: str, method: str, tmp_path: Path) -> None:
    db = str(tmp_path / "threads.sqlite")
    code, _ = _run(kind=kind, db=db, thread="t", input="please look up otters", method="invoke", crash=True)
    assert code == 3  # the process died inside the tool

    code, out = _run(kind=kind, db=db, thread="t", input=None, method=method)
    assert code == 0 and out is not None
    assert out["runs"] == ["please look up otters"]  # the pending call ran (LangGraph re-runs the pending step)
    answer = "answer from tool: found please look up otters"
    if method == "invoke":
        assert out["result"] == answer
    else:
        assert "".join(c for c in out["result"] if isinstance(c, str)) == answer
        assert {"kind": "tool", "phase": "end"}.items() <= next(c for c in out["result"] if is_tool_event(c)).items()
    assert out["sound"] == [True]


@pytest.mark.parametrize("kind", ["agent", "deep"])
def test_after_a_crash_a_new_message_repairs_the_thread(kind: str, tmp_path: Path) -> None:
    db = str(tmp_path / "threads.sqlite")
    code, _ = _run(kind=kind, db=db, thread="t", input="please look up otters", method="invoke", crash=True)
    assert code == 3

    code, out = _run(kind=kind, db=db, thread="t", input="never mind, hello", method="invoke")
    assert code == 0 and out is not None
    assert out["result"] == "plain answer to 'never mind, hello'"
    assert out["runs"] == []  # the crashed call is not run again behind the user's back
    assert out["sound"] == [True]
    (call,) = out["calls"]
    kinds = [m[0] for m in call if m[0] != "system"]
    # The dangling call is answered right after its AI message, before the new user message.
    assert kinds == ["human", "ai", "tool", "human"]
    assert next(m for m in call if m[0] == "tool")[1].startswith("Not run: superseded by a new message")

    # And the thread keeps working afterwards (a third process).
    code, out = _run(kind=kind, db=db, thread="t", input="look up beavers", method="invoke")
    assert code == 0 and out is not None and out["result"] == "answer from tool: found look up beavers"
    assert out["sound"] == [True, True]


def _mailer_model() -> FunctionChatModel:
    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "mail" in str(last.content):
            return {"tool_calls": [{"name": "send_mail", "args": {"to": "bob"}}]}
        return f"ok: {last.text}"

    return FunctionChatModel(reply)


def send_mail(to: str) -> str:
    """Send a mail."""
    return f"sent to {to}"


@pytest.mark.parametrize("wrapper", [Agent, DeepAgent])
def test_a_new_message_while_an_approval_waits_reports_the_superseded_approval(wrapper: Any) -> None:
    model = _mailer_model()
    agent = wrapper(llm=model, tools=[send_mail], checkpointer=InMemorySaver(), interrupt_on={"send_mail": True})
    first = agent.invoke("mail bob", thread_id="t")
    assert is_interrupt(first)

    chunks = list(agent.stream("actually, what time is it?", thread_id="t"))  # show_tool_calls is off
    ended = [c for c in chunks if is_tool_event(c)]
    assert len(ended) == 1 and ended[0]["tool_name"] == "send_mail" and ended[0]["status"] == "error"
    assert ended[0]["output"].startswith("Not run: superseded by a new message")
    assert all(_sound(call) for call in model.calls)
    text = "".join(c for c in chunks if isinstance(c, str))
    assert text.startswith("ok: actually")
    # The thread is sound and stays usable; nothing is pending any more.
    assert agent.pending("t") is None
    assert agent.invoke("thanks", thread_id="t") == "ok: thanks"


def test_invoke_none_explains_what_it_needs() -> None:
    agent = Agent(
        llm=_mailer_model(), tools=[send_mail], checkpointer=InMemorySaver(), interrupt_on={"send_mail": True}
    )
    with pytest.raises(UserError, match="no unfinished run"):
        agent.invoke(None, thread_id="fresh")
    assert is_interrupt(agent.invoke("mail bob", thread_id="t"))
    with pytest.raises(UserError, match="waits for approval"):
        agent.invoke(None, thread_id="t")
    with pytest.raises(UserError, match="nothing to run"):
        Agent(llm=_mailer_model()).invoke(None)


def _slow_echo(delay: float) -> FunctionChatModel:
    async def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        await asyncio.sleep(delay)
        return f"echo {messages[-1].text}"

    return FunctionChatModel(reply)


async def test_concurrent_async_runs_on_one_thread_are_serialised() -> None:
    saver = InMemorySaver()
    agent = Agent(llm=_slow_echo(0.02), checkpointer=saver)
    said = [f"m{i}" for i in range(6)]
    await asyncio.gather(*(agent.ainvoke(text, thread_id="t") for text in said))
    messages = (await agent.graph.aget_state({"configurable": {"thread_id": "t"}})).values["messages"]
    humans = [m.text for m in messages if isinstance(m, HumanMessage)]
    assert sorted(humans) == said  # nothing lost
    # Strictly alternating: every run saw the previous run's answer.
    assert [m.type for m in messages] == ["human", "ai"] * 6


def test_concurrent_sync_runs_and_streams_on_one_thread_are_serialised() -> None:
    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        time.sleep(0.01)
        return f"echo {messages[-1].text}"

    agent = Agent(llm=FunctionChatModel(reply), checkpointer=InMemorySaver())

    def worker(name: str) -> None:
        for i in range(4):
            if i % 2:
                agent.invoke(f"{name}{i}", thread_id="t")
            else:
                list(agent.stream(f"{name}{i}", thread_id="t"))

    threads = [threading.Thread(target=worker, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    messages = agent.graph.get_state({"configurable": {"thread_id": "t"}}).values["messages"]
    assert len([m for m in messages if isinstance(m, HumanMessage)]) == 8
    assert [m.type for m in messages] == ["human", "ai"] * 8


async def test_an_async_run_waiting_for_the_thread_can_be_cancelled() -> None:
    agent = Agent(llm=_slow_echo(0.2), checkpointer=InMemorySaver())
    first = asyncio.create_task(agent.ainvoke("first", thread_id="t"))
    await asyncio.sleep(0.05)
    waiting = asyncio.create_task(agent.ainvoke("second", thread_id="t"))
    await asyncio.sleep(0.01)
    waiting.cancel()
    assert await first == "echo first"
    with pytest.raises(asyncio.CancelledError):
        await waiting
    # The lock was passed on: the thread is free again.
    assert await asyncio.wait_for(agent.ainvoke("third", thread_id="t"), 5) == "echo third"


def test_the_repair_never_touches_a_sound_thread() -> None:
    model = FakeChatModel([{"tool_calls": [{"name": "send_mail", "args": {"to": "x"}}]}, "done", "again"])
    agent = Agent(llm=model, tools=[send_mail], checkpointer=InMemorySaver())
    agent.invoke("mail", thread_id="t")
    agent.invoke("more", thread_id="t")
    texts = [m.text for m in model.calls[-1]]
    assert texts == ["mail", "", "sent to x", "done", "more"]


def test_the_repair_knows_message_subclasses_by_their_base_class() -> None:
    # Chunks are AI / tool messages too: the call `c1` is answered, `c2` is not (and nothing follows the call).
    calls = [{"name": "a", "args": {}, "id": "c1"}, {"name": "b", "args": {}, "id": "c2"}]
    messages: list[Any] = [
        HumanMessage("hi", id="h"),
        AIMessageChunk(content="", tool_calls=calls, id="a1"),
        ToolMessageChunk("done", tool_call_id="c1", id="t1"),
    ]
    assert [(i, c["id"]) for i, c in unanswered_calls(messages)] == [(1, "c2")]
    update = repair_messages(messages)
    assert update is not None and [(m.tool_call_id, m.status) for m in update] == [("c2", "error")]
    assert repair_messages([*messages, *update]) is None


def test_a_repaired_thread_streams_no_tool_chunks_for_its_history() -> None:
    model = FakeChatModel(
        [
            {"tool_calls": [{"name": "send_mail", "args": {"to": "ann"}, "id": "old"}]},
            "sent",
            {"tool_calls": [{"name": "send_mail", "args": {"to": "bob"}, "id": "waiting"}]},
            "ok then",
        ]
    )
    agent = Agent(llm=model, tools=[send_mail], checkpointer=InMemorySaver(), interrupt_on={"send_mail": True})
    assert is_interrupt(agent.invoke("mail ann", thread_id="h"))
    assert agent.invoke(thread_id="h", decision="approve") == "sent"
    assert is_interrupt(agent.invoke("mail bob", thread_id="h"))

    chunks = list(agent.stream("never mind", thread_id="h", show_tool_calls=True))
    tools = [(c["phase"], c["id"], c.get("status")) for c in chunks if is_tool_event(c)]
    assert tools == [("end", "waiting", "error")]  # the superseded call only; the old call is history
    assert "".join(c for c in chunks if isinstance(c, str)) == "ok then"
