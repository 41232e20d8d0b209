"""How a turn stops (SPEC §14b): ``timeout``, ``yield_at`` and ``resume()``, the new stop reasons, and double
texting (``on_busy``) within one process. The two-process versions are in ``test_sessions_processes.py``."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _session_work import blocking_tool, worker_model
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ai_utils import Agent, SessionBusyError, UserError, durable_tool, memory_sessions
from ai_utils.client import is_turn_event
from ai_utils.sessions import SessionStore
from ai_utils.testing import FakeChatModel, FunctionChatModel


@pytest.fixture
def store() -> Iterator[SessionStore]:
    sessions = memory_sessions()
    yield sessions
    sessions.close()  # type: ignore[attr-defined]


def _kinds(chunks: list[Any]) -> list[str]:
    return [c if isinstance(c, str) else c["kind"] for c in chunks]


def _wait_until(check: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def _sound(messages: list[BaseMessage]) -> bool:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return all(c["id"] in answered for m in messages if isinstance(m, AIMessage) for c in m.tool_calls)


def test_a_timeout_cancels_the_turn_with_a_timeout_error(store: SessionStore) -> None:
    started = threading.Event()

    async def slow(messages: list[BaseMessage], tools: list[Any]) -> str:
        started.set()
        await asyncio.sleep(60)
        return "too late"

    agent = Agent(llm=FunctionChatModel(slow), sessions=store)
    s = agent.session()
    began = time.monotonic()
    turn = s.prompt("think", timeout=0.5)
    result = turn.result(timeout=30)
    assert started.is_set() and time.monotonic() - began < 20
    assert result.stop_reason == "cancelled"
    assert result.error is not None and result.error["type"] == "TimeoutError"
    assert list(turn)[-1] == {**list(turn)[-1], "kind": "turn_end", "stop_reason": "cancelled"}
    for bad in (0, -1, float("nan"), True, "5"):
        with pytest.raises(UserError, match="timeout"):
            s.prompt("x", timeout=bad)  # type: ignore[arg-type]


def _tool_loop_agent(store: SessionStore, calls: list[list[BaseMessage]], rounds: int = 3) -> Agent:
    def step(n: int) -> str:
        """Take a step."""
        time.sleep(0.3)  # so a yield_at a little ahead falls between model calls
        return f"step {n} done"

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        calls.append(list(messages))
        done = sum(1 for m in messages if isinstance(m, ToolMessage))
        if done < rounds:
            return {"tool_calls": [{"name": "step", "args": {"n": done + 1}}]}
        return f"finished after {done} steps"

    return Agent(llm=FunctionChatModel(reply), tools=[durable_tool(step, idempotent=True)], sessions=store)


def test_yield_at_stops_before_the_next_model_call_and_resume_continues_without_a_note(store: SessionStore) -> None:
    calls: list[list[BaseMessage]] = []
    agent = _tool_loop_agent(store, calls)
    s = agent.session()
    turn = s.prompt("work", yield_at=time.time() + 0.15)
    first = turn.result(timeout=30)
    assert first.stop_reason == "yielded"
    chunks = list(turn)
    assert chunks[0]["kind"] == "turn_start" and chunks[-1] == {"kind": "turn_yield", "turn_id": turn.id}
    assert not store.busy(s.id)  # a yielded turn waits for resume() or the next prompt
    made = len(calls)

    resumed = s.resume()
    assert resumed.id == turn.id
    final = resumed.result(timeout=30)
    assert final.stop_reason == "end_turn" and final.output == "finished after 3 steps"
    rest = list(resumed)
    assert rest[0] == {"kind": "turn_resume", "turn_id": turn.id} and rest[-1]["kind"] == "turn_end"
    assert len(calls) > made
    # No resume note: neither as a message nor in the system prompt.
    assert not any("[system note]" in m.text for call in calls for m in call)
    assert [m.type for m in s.history()].count("human") == 1
    with pytest.raises(UserError, match="no yielded turn"):
        s.resume()
    with pytest.raises(UserError, match="in the past"):
        s.prompt("late", yield_at=time.time() - 1)
    with pytest.raises(UserError, match="unix time"):
        s.prompt("late", yield_at="soon")  # type: ignore[arg-type]


def test_the_next_prompt_continues_a_yielded_turn_first(store: SessionStore) -> None:
    calls: list[list[BaseMessage]] = []
    agent = _tool_loop_agent(store, calls, rounds=2)
    s = agent.session()
    first = s.prompt("work", yield_at=time.time() + 0.15)
    assert first.result(timeout=30).stop_reason == "yielded"
    second = s.prompt("and then?")
    assert second.result(timeout=30).stop_reason == "end_turn"
    assert first.result().stop_reason == "end_turn"  # the same turn, continued to its end
    kinds = [line["chunk"]["kind"] for line in s.stream(0) if is_turn_event(line["chunk"])]
    assert kinds == ["turn_start", "turn_yield", "turn_resume", "turn_end", "turn_start", "turn_end"]
    humans = [m.text for m in s.history() if isinstance(m, HumanMessage)]
    assert humans == ["work", "and then?"]
    assert _sound(s.history())


def test_a_steer_continues_a_yielded_turn_and_joins_it(store: SessionStore) -> None:
    calls: list[list[BaseMessage]] = []
    agent = _tool_loop_agent(store, calls, rounds=2)
    s = agent.session()
    first = s.prompt("work", yield_at=time.time() + 0.15)
    assert first.result(timeout=30).stop_reason == "yielded"
    steer_id = s.steer("and hurry")
    # The steer joins the yielded turn (continued, without a resume note) instead of running a turn of its own on
    # that turn's thread, which left the yielded turn nothing to continue (it ended "unknown").
    _wait_until(lambda: not store.busy(s.id))
    assert first.result(timeout=30).stop_reason == "end_turn"
    lines = [line["chunk"] for line in s.stream(0)]
    kinds = [c["kind"] for c in lines if isinstance(c, dict) and (is_turn_event(c) or c["kind"] == "user_message")]
    assert kinds == ["turn_start", "turn_yield", "turn_resume", "user_message", "turn_end"]
    assert {c["turn_id"] for c in lines if isinstance(c, dict) and is_turn_event(c)} == {first.id}
    assert next(c for c in lines if isinstance(c, dict) and c["kind"] == "user_message")["id"] == steer_id
    assert [m.text for m in s.history() if isinstance(m, HumanMessage)] == ["work", "and hurry"]
    assert not any("[system note]" in m.text for call in calls for m in call)
    assert _sound(s.history())


@pytest.mark.parametrize(
    ("metadata", "stop"),
    [
        ({"finish_reason": "length"}, "max_output_tokens"),
        ({"stop_reason": "max_tokens"}, "max_output_tokens"),
        ({"finish_reason": "content_filter"}, "refused"),
        ({"stop_reason": "refusal"}, "refused"),
        ({"finish_reason": "stop"}, "end_turn"),
    ],
)
def test_a_model_that_hits_its_limit_or_refuses_ends_the_turn_so(
    store: SessionStore, metadata: dict[str, str], stop: str
) -> None:
    agent = Agent(llm=FakeChatModel([AIMessage("partial answ", response_metadata=metadata)]), sessions=store)
    result = agent.session().prompt("write a novel").result()
    assert (result.stop_reason, result.output) == (stop, "partial answ")


def test_on_busy_reject_raises_and_stores_nothing(store: SessionStore) -> None:
    started, release = threading.Event(), threading.Event()
    agent = Agent(llm=worker_model([]), tools=[blocking_tool(started, release)], sessions=store)
    s = agent.session()
    running = s.prompt("work hard")
    assert started.wait(30)
    cursor = store.last_cursor(s.id)
    with pytest.raises(SessionBusyError) as caught:
        s.prompt("are you there?", on_busy="reject", message_id="ping-1")
    assert caught.value.code == "SESSION_BUSY" and isinstance(caught.value, UserError)
    release.set()
    assert running.result(timeout=30).stop_reason == "end_turn"
    assert store.last_cursor(s.id) > cursor
    assert [m.text for m in s.history() if isinstance(m, HumanMessage)] == ["work hard"]
    # Nothing was stored: the same message id is new, and with no turn running reject just runs.
    assert s.prompt("are you there?", on_busy="reject", message_id="ping-1").result().stop_reason == "end_turn"
    with pytest.raises(UserError, match="on_busy='later'"):
        s.prompt("x", on_busy="later")  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_on_busy_interrupt_and_rollback_cancel_the_running_turn_at_once(store: SessionStore, strategy: str) -> None:
    started, release = threading.Event(), threading.Event()
    seen: list[list[BaseMessage]] = []
    agent = Agent(llm=worker_model(seen), tools=[blocking_tool(started, release)], sessions=store)
    s = agent.session()
    s.prompt("hello").result()
    running = s.prompt("work on the report")
    assert started.wait(30)
    began = time.monotonic()
    new = s.prompt("stop, do this instead", on_busy=strategy)  # type: ignore[arg-type]
    assert running.result(timeout=30).stop_reason == "cancelled"
    assert time.monotonic() - began < 10
    assert new.result(timeout=30).output == "answer to 'stop, do this instead'"
    assert _sound(seen[-1])  # the new turn's model never saw an unanswered call
    humans = [m.text for m in s.history() if isinstance(m, HumanMessage)]
    lines = [line["chunk"] for line in s.stream(0)]
    ends = [c for c in lines if isinstance(c, dict) and c.get("turn_id") == running.id]
    if strategy == "interrupt":
        assert humans == ["hello", "work on the report", "stop, do this instead"]
        closed = [m for m in s.history() if isinstance(m, ToolMessage)]
        assert closed[-1].status == "error" and "cancelled" in closed[-1].text
    else:
        # Its messages left the thread; its log lines stay, followed by turn_rollback.
        assert humans == ["hello", "stop, do this instead"]
        assert [c["kind"] for c in ends][-2:] == ["turn_end", "turn_rollback"]
    assert ends[0]["kind"] == "turn_start" and any(isinstance(c, dict) and c["kind"] == "tool" for c in lines)


def test_on_busy_enqueue_keeps_order(store: SessionStore) -> None:
    started, release = threading.Event(), threading.Event()
    agent = Agent(llm=worker_model([]), tools=[blocking_tool(started, release)], sessions=store)
    s = agent.session()
    first = s.prompt("work first")
    assert started.wait(30)
    later = [s.prompt(f"then {i}", on_busy="enqueue") for i in range(3)]
    release.set()
    assert [t.result(timeout=30).output for t in later] == [f"answer to 'then {i}'" for i in range(3)]
    assert first.result().stop_reason == "end_turn"
    humans = [m.text for m in s.history() if isinstance(m, HumanMessage)]
    assert humans == ["work first", "then 0", "then 1", "then 2"]


def test_a_rollback_cut_short_by_a_crash_is_finished_by_the_next_worker_and_never_removes_more(
    tmp_path: Any,
) -> None:
    from ai_utils import sqlite_sessions

    path = tmp_path / "rb.sqlite"
    store = sqlite_sessions(path, lease_seconds=0.5)
    try:
        agent = Agent(llm=FakeChatModel(["first answer", "second answer"]), sessions=store)
        s = agent.session("rb")
        s.prompt("keep me").result()
        doomed = s.prompt("roll me back")
        assert doomed.result().stop_reason == "end_turn"
        kept = [m.id for m in s.history()][:2]
        seq = store.turn(doomed.id).seq  # type: ignore[union-attr]
    finally:
        store.close()  # type: ignore[attr-defined]

    def crash_mid_rollback() -> None:
        # As a worker that died while rolling the turn back: the turn is running, marked for rollback and
        # cancelled, and its lease expired (where exactly it died: before, or after, its one checkpoint write).
        import sqlite3

        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE ai_utils_turns SET status = 'running', rollback = 1 WHERE turn_id = ?", (doomed.id,))
            conn.execute("UPDATE ai_utils_sessions SET cancel_seq = ?, lease_owner = 'gone', lease_until = 0", (seq,))

    for _ in range(2):  # the second time the thread was already rolled back: nothing more goes
        crash_mid_rollback()
        store = sqlite_sessions(path, lease_seconds=0.5)
        try:
            agent = Agent(llm=FakeChatModel(["never"]), sessions=store)
            assert agent.recover() == 1
            _wait_until(lambda: not store.busy("rb"))  # noqa: B023
            s = agent.session("rb")
            assert [m.id for m in s.history()] == kept
            kinds = [line["chunk"]["kind"] for line in s.stream(0) if is_turn_event(line["chunk"])]
            assert kinds[-2:] == ["turn_end", "turn_rollback"]
        finally:
            store.close()  # type: ignore[attr-defined]
