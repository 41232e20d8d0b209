"""Durable sessions in one process: turns, the stream log, message ids, steering, cancel, bad input."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from pydantic import BaseModel

from ai_utils import (
    Agent,
    DeepAgent,
    MCPServer,
    MessageIdInUseError,
    ToolRegistry,
    UserError,
    durable_tool,
    memory_sessions,
    postgres_sessions,
    sqlite_sessions,
)
from ai_utils.client import is_tool_event, is_turn_event, is_user_message
from ai_utils.sessions import SessionStore
from ai_utils.testing import FakeChatModel, FunctionChatModel


@pytest.fixture
def store() -> Iterator[SessionStore]:
    sessions = memory_sessions()
    yield sessions
    sessions.close()  # type: ignore[attr-defined]


def lookup(city: str) -> str:
    """Weather for a city."""
    return f"{city}: sunny"


def _sound(messages: list[BaseMessage]) -> bool:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return all(c["id"] in answered for m in messages if isinstance(m, AIMessage) for c in m.tool_calls)


def test_a_turn_is_stored_before_prompt_returns_and_streams_its_own_chunks(store: SessionStore) -> None:
    model = FakeChatModel([{"tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}}]}, "Oslo is sunny.", "Bye."])
    agent = Agent(llm=model, tools=[durable_tool(lookup, idempotent=True)], sessions=store, name="weather")
    s = agent.session()
    turn = s.prompt("Weather in Oslo?", message_id="m-1")
    assert (turn.session_id, turn.message_id) == (s.id, "m-1") and turn.id
    chunks = list(turn)
    assert [c["phase"] for c in chunks if is_tool_event(c)] == ["start", "end"]
    assert "".join(c for c in chunks if isinstance(c, str)) == "Oslo is sunny."
    # The turn's own iteration starts with its turn_start line (a browser learns the session id first).
    assert chunks[0] == {"kind": "turn_start", "turn_id": turn.id, "session_id": s.id, "message_id": "m-1"}
    assert chunks[-1]["kind"] == "turn_end" and chunks[-1]["stop_reason"] == "end_turn"
    assert [c for c in chunks if is_turn_event(c)] == [chunks[0], chunks[-1]]
    result = turn.result()
    assert (result.stop_reason, result.output, result.repeated, result.error) == (
        "end_turn",
        "Oslo is sunny.",
        False,
        None,
    )
    expected = {
        key: sum(int((m.usage_metadata or {}).get(key, 0)) for m in s.history() if isinstance(m, AIMessage))
        for key in ("input_tokens", "output_tokens", "total_tokens")
    }
    assert result.usage == expected and result.usage["total_tokens"] > 0

    second = s.prompt("Thanks")
    assert [c for c in second if not is_turn_event(c)] == ["Bye."]  # only its own chunks
    lines = list(s.stream(0))
    assert [line["cursor"] for line in lines] == list(range(1, len(lines) + 1))
    kinds = [line["chunk"]["kind"] for line in lines if isinstance(line["chunk"], dict)]
    assert kinds[0] == "turn_start" and kinds.count("turn_end") == 2
    assert lines[0]["chunk"] == {"kind": "turn_start", "turn_id": turn.id, "session_id": s.id, "message_id": "m-1"}
    assert list(s.stream(lines[-3]["cursor"])) == lines[-2:]
    assert [m.type for m in s.history()] == ["human", "ai", "tool", "ai", "human", "ai"]


async def test_async_prompt_iteration_result_and_stream(store: SessionStore) -> None:
    agent = Agent(llm=FakeChatModel(["Hallo Welt."]), sessions=store)
    s = agent.session("chat-1")
    turn = await s.aprompt("Hi")
    assert [c async for c in turn if not is_turn_event(c)] == ["Hallo ", "Welt."]
    assert (await turn.aresult()).output == "Hallo Welt."
    lines = [line async for line in s.astream(0)]
    assert [line["chunk"] for line in lines][1:3] == ["Hallo ", "Welt."]


def _slow_words(n: int, delay: float = 0.0, started: threading.Event | None = None) -> FunctionChatModel:
    async def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        if started is not None:
            started.set()
        await asyncio.sleep(delay)
        return " ".join(f"w{i}" for i in range(n))

    return FunctionChatModel(reply)


def test_a_reader_that_stops_early_does_not_stop_the_turn(store: SessionStore) -> None:
    agent = Agent(llm=_slow_words(200), sessions=store)
    s = agent.session()
    turn = s.prompt("talk")
    for _chunk in turn:
        break  # the client went away
    assert turn.result(timeout=30).stop_reason == "end_turn"
    text = "".join(line["chunk"] for line in s.stream(0) if isinstance(line["chunk"], str))
    assert text == " ".join(f"w{i}" for i in range(200))


def test_a_repeated_message_id_runs_the_model_once(store: SessionStore) -> None:
    model = FakeChatModel(["Once."])
    agent = Agent(llm=model, sessions=store)
    s = agent.session()
    first = s.prompt("Hi", message_id="req-7")
    assert first.result().output == "Once."
    again = agent.session(s.id).prompt("Hi", message_id="req-7")  # a client retry
    assert again.id == first.id and [c for c in again if not is_turn_event(c)] == ["Once."]
    assert again.result().repeated is True and len(model.calls) == 1

    with pytest.raises(MessageIdInUseError) as caught:
        s.steer("more", message_id="req-7")
    assert caught.value.code == "MESSAGE_ID_IN_USE"
    s.steer("a steer", message_id="steer-1")
    with pytest.raises(MessageIdInUseError, match="steer-1"):
        s.prompt("Hi", message_id="steer-1")


def test_steering_reaches_the_same_turns_next_model_call(store: SessionStore) -> None:
    started, release = threading.Event(), threading.Event()

    def slow_lookup(city: str) -> str:
        """Weather for a city (slow)."""
        started.set()
        release.wait(10)
        return f"{city}: rain"

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        if len([m for m in messages if isinstance(m, AIMessage)]) == 0:
            return {"tool_calls": [{"name": "slow_lookup", "args": {"city": "Bergen"}}]}
        return f"seen: {[m.text for m in messages if isinstance(m, HumanMessage)]}"

    model = FunctionChatModel(reply)
    agent = Agent(llm=model, tools=[durable_tool(slow_lookup, idempotent=True)], sessions=store)
    s = agent.session()
    turn = s.prompt("Weather in Bergen?")
    assert started.wait(10)
    steer_id = s.steer("Also: in Celsius please.", message_id="s1")
    release.set()
    chunks = list(turn)
    assert turn.result().output == "seen: ['Weather in Bergen?', 'Also: in Celsius please.']"
    assert len(model.calls) == 2  # joined this turn, no turn of its own
    joined = [c for c in chunks if is_user_message(c)]
    assert joined == [{"kind": "user_message", "text": "Also: in Celsius please.", "id": steer_id}]
    # Never between a tool call and its result: after the tool's end, before the answer.
    order = [
        ("tool-end" if is_tool_event(c) and c["phase"] == "end" else c if isinstance(c, str) else c["kind"])
        for c in chunks
    ]
    assert order.index("tool-end") < order.index("user_message") < len(order) - 1
    assert _sound(model.calls[-1])

    # With no turn running, a steer becomes the next turn.
    s.steer("One more thing.")
    deadline = time.monotonic() + 10
    while store.busy(s.id) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert s.history()[-1].text == "seen: ['Weather in Bergen?', 'Also: in Celsius please.', 'One more thing.']"


def test_cancel_ends_a_running_tool_with_cancelled_and_leaves_no_dangling_call(store: SessionStore) -> None:
    running = threading.Event()

    @tool
    async def wait_forever(topic: str) -> str:
        """Wait for something that never comes."""
        running.set()
        await asyncio.Event().wait()
        return "never"

    model = FakeChatModel([{"tool_calls": [{"name": "wait_forever", "args": {"topic": "x"}}]}, "after cancel"])
    agent = Agent(llm=model, tools=[durable_tool(wait_forever, idempotent=False)], sessions=store)
    s = agent.session()
    turn = s.prompt("wait")
    assert running.wait(10)
    s.cancel()
    result = turn.result(timeout=10)
    assert result.stop_reason == "cancelled"
    history = s.history()
    assert _sound(history) and isinstance(history[-1], ToolMessage) and history[-1].status == "error"
    lines = [line["chunk"] for line in s.stream(0)]
    assert lines[-2]["phase"] == "end" and lines[-2]["status"] == "error"
    assert lines[-1]["kind"] == "turn_end" and lines[-1]["stop_reason"] == "cancelled"
    # The session goes on; the model never sees the cancelled call unanswered.
    assert s.prompt("next").result().output == "after cancel"
    assert _sound(model.calls[-1])


def test_cancel_stops_a_model_call_in_flight_at_once(store: SessionStore) -> None:
    started = threading.Event()
    agent = Agent(llm=_slow_words(3, delay=30, started=started), sessions=store)
    s = agent.session()
    turn = s.prompt("think hard")
    assert started.wait(10)
    began = time.monotonic()
    s.cancel()
    assert turn.result(timeout=10).stop_reason == "cancelled"
    assert time.monotonic() - began < 2


def test_an_approval_ends_the_turn_interrupted_and_a_decision_continues_it(store: SessionStore) -> None:
    def send_mail(to: str) -> str:
        """Send a mail."""
        return f"sent to {to}"

    model = FakeChatModel([{"tool_calls": [{"name": "send_mail", "args": {"to": "bob"}}]}, "Mail sent."])
    agent = Agent(
        llm=model,
        tools=[durable_tool(send_mail, idempotent=False)],
        sessions=store,
        interrupt_on={"send_mail": {"decisions": ["approve", "reject"], "question": "Send it?"}},
    )
    s = agent.session()
    first = s.prompt("mail bob")
    assert first.result().stop_reason == "interrupted"
    assert [c for c in first if isinstance(c, dict) and c["kind"] == "interrupt"][0]["question"] == "Send it?"
    second = s.prompt(decision="approve")
    assert second.result().stop_reason == "end_turn" and second.result().output == "Mail sent."
    with pytest.raises(UserError, match="no approval waiting"):
        s.prompt(decision="approve")


def test_a_failing_model_ends_the_turn_with_error(store: SessionStore) -> None:
    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        raise RuntimeError("provider down")

    agent = Agent(llm=FunctionChatModel(reply), sessions=store)
    result = agent.session().prompt("hi").result()
    assert result.stop_reason == "error" and result.error is not None and result.error["type"] == "RuntimeError"
    # Not the raw text (a provider's may quote a key): a generic message naming the class and the log's error id.
    assert result.error["message"].startswith("The turn failed (RuntimeError)") and "provider down" not in str(result)


@dataclass
class Secrets:
    api_token: str


def test_execution_ids_reach_tools_and_context_is_never_stored(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    @tool
    def by_config(order: str, config: RunnableConfig) -> str:
        """Look at an order."""
        seen["config"] = config["configurable"]["execution_id"]
        return "ok"

    def by_keyword(order: str, execution_id: str) -> str:
        """Refund an order."""
        seen["keyword"] = execution_id
        return "refunded"

    @tool
    def by_runtime(order: str, runtime: ToolRuntime[Secrets]) -> str:
        """Ship an order."""
        seen["runtime"] = runtime.config["configurable"]["execution_id"]
        seen["context"] = runtime.context
        return "shipped"

    class Args(BaseModel):
        order: str

    def registered(order: str, execution_id: str) -> str:
        seen["registry"] = execution_id
        return "noted"

    registry = ToolRegistry(
        [{"name": "note", "description": "Note it.", "schema": Args, "func": registered, "idempotent": True}]
    )
    calls = [{"name": n, "args": {"order": "7"}} for n in ("by_config", "by_keyword", "by_runtime", "note")]
    store = sqlite_sessions(tmp_path / "s.sqlite")
    try:
        refund = durable_tool(by_keyword, idempotent=True, writes=True)
        assert "execution_id" not in refund.args  # hidden from the model
        assert refund.metadata == {"idempotent": True, "writes": True}
        agent = Agent(
            llm=FakeChatModel([{"tool_calls": calls}, "done"]),
            tools=[
                durable_tool(by_config, idempotent=True),
                refund,
                durable_tool(by_runtime, idempotent=True),
                *registry.all_tools,
            ],
            sessions=store,
            context_schema=Secrets,
        )
        secret = Secrets(api_token="SECRET-TOKEN-123")
        assert agent.session(context=secret).prompt("go").result().output == "done"
    finally:
        store.close()  # type: ignore[attr-defined]
    ids = [seen["config"], seen["keyword"], seen["runtime"], seen["registry"]]
    assert len(set(ids)) == 4 and all(isinstance(i, str) and len(i) == 32 for i in ids)
    assert seen["context"] == secret
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"SECRET-TOKEN-123" not in stored


def test_bad_input_raises_user_errors_naming_the_value(store: SessionStore) -> None:
    agent = Agent(llm=FakeChatModel(["x"], cycle=True), sessions=store, name="support")
    with pytest.raises(UserError, match="'bad id!'"):
        agent.session("bad id!")
    s = agent.session("ok-1")
    with pytest.raises(UserError, match="message_id"):
        s.prompt("hi", message_id="x" * 200)
    with pytest.raises(UserError, match="64 KiB"):
        s.steer("x" * (64 * 1024 + 1))
    with pytest.raises(UserError, match="no approval waiting"):
        s.prompt(decision="approve")
    with pytest.raises(UserError, match="not both"):
        s.prompt("hi", decision="approve")
    s.prompt("hi").result()
    with pytest.raises(UserError, match="'support'.*'billing'|'billing'.*'support'"):
        Agent(llm=FakeChatModel(["x"]), sessions=store, name="billing").session("ok-1")
    with pytest.raises(UserError, match=r"\['lookup'\]"):
        Agent(llm=FakeChatModel(["x"]), tools=[lookup], sessions=store)
    with pytest.raises(UserError, match=r"\['lookup'\]"):
        DeepAgent(llm=FakeChatModel(["x"]), tools=[lookup], sessions=store)
    with pytest.raises(UserError, match="not both"):
        Agent(llm=FakeChatModel(["x"]), sessions=store, checkpointer=store.checkpointer.__class__(":memory:"))
    with pytest.raises(UserError, match="idempotent"):
        MCPServer("crm", url="http://127.0.0.1:9/mcp", idempotent="get_contact")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="sessions="):
        Agent(llm=FakeChatModel(["x"])).session()
    with pytest.raises(UserError, match=r"Agent\.recover\(\) needs durable sessions.*sessions="):
        Agent(llm=FakeChatModel(["x"])).recover()
    # MCP tools need no declaration: they count as not idempotent unless the server names them.
    Agent(llm=FakeChatModel(["x"]), sessions=store, mcp_server=MCPServer("crm", url="http://127.0.0.1:9/mcp"))


@pytest.mark.parametrize("lease", [float("nan"), float("inf"), 0, -1.0, True, "30", 10**400])
def test_a_lease_that_is_not_a_positive_finite_number_of_seconds_is_refused(tmp_path: Path, lease: Any) -> None:
    with pytest.raises(UserError, match="lease_seconds must be a positive, finite number") as raised:
        sqlite_sessions(tmp_path / "s.db", lease_seconds=lease)
    assert len(str(raised.value)) < 200  # a huge value is not echoed whole
    assert not (tmp_path / "s.db").exists()  # refused before the file is opened
    with pytest.raises(UserError, match="lease_seconds"):  # before the pool connects (nothing listens on port 9)
        postgres_sessions("postgresql://nobody@127.0.0.1:9/none", lease_seconds=lease)


def test_a_lease_of_an_int_past_the_digit_limit_is_named_by_its_size(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="an int of 16610 bits"):
        sqlite_sessions(tmp_path / "s.db", lease_seconds=10**5000)


def test_steers_past_64_queued_are_refused(store: SessionStore) -> None:
    started = threading.Event()
    agent = Agent(llm=_slow_words(1, delay=30, started=started), sessions=store)
    s = agent.session()
    turn = s.prompt("busy")
    assert started.wait(10)  # the model call runs: steers queue for the next one
    for i in range(64):
        s.steer(f"steer {i}")
    with pytest.raises(UserError, match="64 steers"):
        s.steer("one too many")
    s.cancel()
    assert turn.result(timeout=10).stop_reason == "cancelled"


def test_deep_agent_sessions_and_structured_output(store: SessionStore) -> None:
    class Answer(BaseModel):
        city: str

    write = {"name": "write_file", "args": {"file_path": "/notes.txt", "content": "Oslo"}}
    deep = DeepAgent(llm=FakeChatModel([{"tool_calls": [write]}, "Noted."]), sessions=store, name="deep")
    turn = deep.session().prompt("note Oslo")
    assert turn.result().output == "Noted."
    assert [c["tool_name"] for c in turn if is_tool_event(c)] == ["write_file", "write_file"]

    typed = Agent(
        llm=FakeChatModel([{"tool_calls": [{"name": "Answer", "args": {"city": "Oslo"}}]}]),
        output=Answer,
        sessions=store,
        name="typed",
    )
    assert typed.session().prompt("which city?").result().output == Answer(city="Oslo")


def test_a_full_disk_fails_prompt_and_accepts_nothing(tmp_path: Path) -> None:
    store = sqlite_sessions(tmp_path / "full.sqlite")
    try:
        agent = Agent(llm=FakeChatModel(["ok"], cycle=True), sessions=store)
        s = agent.session("disk")
        assert s.prompt("first").result().output == "ok"
        conn = store.checkpointer.conn  # type: ignore[attr-defined]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full now
        with pytest.raises(Exception, match="full"):
            s.prompt("x" * 200_000)
        conn.execute("PRAGMA max_page_count = 1073741823")
        assert not store.busy(s.id)  # nothing half-accepted: no queued turn, no input
        assert [m.text for m in s.history() if isinstance(m, HumanMessage)] == ["first"]
        assert s.prompt("again").result().output == "ok"
    finally:
        store.close()  # type: ignore[attr-defined]


def test_a_turn_that_never_stops_calling_tools_ends_with_max_model_turns(store: SessionStore) -> None:
    def again(messages: list[BaseMessage], tools: list[Any]) -> Any:
        return {"tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}}]}

    # max_iterations=None: no tool-round limit (by default the model must answer after 5), so the turn runs into
    # LangGraph's recursion limit.
    agent = Agent(
        llm=FunctionChatModel(again), tools=[durable_tool(lookup, idempotent=True)], sessions=store, max_iterations=None
    )
    s = agent.session()
    assert s.prompt("loop").result(timeout=120).stop_reason == "max_model_turns"
    assert s.prompt("loop").result(timeout=120).stop_reason == "max_model_turns"  # and the session goes on


async def test_waiting_synchronously_on_a_turn_this_loop_runs_is_refused(store: SessionStore) -> None:
    agent = Agent(llm=FakeChatModel(["async answer"]), sessions=store)
    s = agent.session()
    turn = await s.aprompt("hi")
    with pytest.raises(UserError, match="aresult"):
        turn.result()  # would deadlock: the turn runs as a task on this very loop
    assert (await turn.aresult()).output == "async answer"


def test_a_turn_whose_end_was_never_recorded_and_cannot_continue_ends_unknown(tmp_path: Path) -> None:
    path = tmp_path / "u.sqlite"
    store = sqlite_sessions(path, lease_seconds=0.2)
    try:
        agent = Agent(llm=FakeChatModel(["done"]), sessions=store)
        s = agent.session("lost-end")
        turn = s.prompt("hi")
        assert turn.result().stop_reason == "end_turn"
    finally:
        store.close()  # type: ignore[attr-defined]
    # As if the worker died after the last checkpoint, before it recorded the turn's end.
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ai_utils_turns SET status = 'running', stop_reason = NULL WHERE turn_id = ?", (turn.id,))
    store = sqlite_sessions(path, lease_seconds=0.2)
    try:
        agent = Agent(llm=FakeChatModel(["never called"]), sessions=store)
        assert agent.recover() == 1
        again = agent.session("lost-end").prompt("hi", message_id=turn.message_id)
        result = again.result(timeout=10)
        assert (result.stop_reason, result.repeated, result.output) == ("unknown", True, "done")
    finally:
        store.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize(("idempotent", "journaled"), [((), 1), (("increment",), 0)])
def test_mcp_tools_count_as_not_idempotent_unless_the_server_names_them(
    counter_url: str, tmp_path: Path, idempotent: tuple[str, ...], journaled: int
) -> None:
    inc = {"tool_calls": [{"name": "counter__increment", "args": {}}]}
    store = sqlite_sessions(tmp_path / "mcp.sqlite")
    try:
        server = MCPServer("counter", counter_url, idempotent=idempotent)
        agent = Agent(llm=FakeChatModel([inc, "eins"]), mcp_server=server, sessions=store)
        turn = agent.session().prompt("zähle")
        assert turn.result(timeout=30).output == "eins"
        assert [c["output"] for c in turn if is_tool_event(c) and c["phase"] == "end"] == ["1"]
    finally:
        store.close()  # type: ignore[attr-defined]
    # A non-idempotent call is recorded before it starts: after a crash it would not run again on its own.
    with sqlite3.connect(tmp_path / "mcp.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM ai_utils_calls").fetchone()[0] == journaled


def test_a_sync_waiter_is_woken_by_its_own_session_and_by_a_reconnect_not_by_others() -> None:
    from ai_utils.sessions._engine import Signal

    signal = Signal()
    woken: list[float] = []

    def wait(seen: int) -> None:
        began = time.monotonic()
        signal.wait("mine", seen, 5.0)
        woken.append(time.monotonic() - began)

    for wake in (lambda: signal.publish("mine"), signal.publish_all):
        woken.clear()
        waiter = threading.Thread(target=wait, args=(signal.version("mine"),))
        waiter.start()
        time.sleep(0.1)
        signal.publish("other")  # another session's line: the waiter sleeps on
        time.sleep(0.1)
        assert waiter.is_alive() and not woken
        wake()
        waiter.join(5)
        assert woken and woken[0] < 4
    signal.wait("mine", signal.version("mine") - 1, 5.0)  # a version already past: returns at once
