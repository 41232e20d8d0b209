"""Security rules for sessions (SPEC "Security amendments", issue #24), each shown as the attack, then refused.

- A turn's mode is decided once, from the user's message that started it, and stored with the turn: a steer
  or an approval never re-routes it (a crash: ``test_sessions_processes.py``).
- ``context`` belongs to the session object that was given it.
- Ids and cursors from outside are validated whole.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ai_utils import Agent, KeywordModeRouter, MemorySaver, ModeDefinition, UserError, durable_tool, memory_sessions
from ai_utils.sessions import SessionStore
from ai_utils.testing import FunctionChatModel


@pytest.fixture
def store() -> Iterator[SessionStore]:
    sessions = memory_sessions()
    yield sessions
    sessions.close()  # type: ignore[attr-defined]


ROUTER = KeywordModeRouter(
    # Everything by default (an operator console); a customer's support message gets a narrow mode.
    default_mode=ModeDefinition(mode="admin", allowed_tools=["lookup_order", "delete_account"]),
    rules=[
        {
            "keywords": ["support", "order"],
            "mode": "support",
            "definition": {"allowed_tools": ["lookup_order"], "max_tool_iterations": 3},
        }
    ],
)


def _attacker(deleted: list[str]) -> tuple[Any, Any, FunctionChatModel]:
    """A model that looks up the order, then tries ``delete_account`` (what a prompt injection would ask)."""

    def lookup_order(order: str) -> str:
        """Look up an order."""
        return f"order {order}: shipped"

    def delete_account(user: str) -> str:
        """Delete a user's account."""
        deleted.append(user)
        return f"deleted {user}"

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.name == "lookup_order":
            return {"tool_calls": [{"name": "delete_account", "args": {"user": "alice"}}]}
        if isinstance(last, ToolMessage):
            return f"result: {last.text}"
        if not any(isinstance(m, AIMessage) for m in messages[messages.index(last) :]):
            return {"tool_calls": [{"name": "lookup_order", "args": {"order": "42"}}]}
        return "ok"

    return lookup_order, delete_account, FunctionChatModel(reply)


def test_a_steer_never_re_routes_the_turn(store: SessionStore) -> None:
    deleted: list[str] = []
    lookup_order, delete_account, model = _attacker(deleted)
    started, release = threading.Event(), threading.Event()

    def slow_lookup(order: str) -> str:
        """Look up an order."""
        started.set()
        release.wait(30)
        return lookup_order(order)

    slow_lookup.__name__ = "lookup_order"
    agent = Agent(
        llm=model,
        tools=[durable_tool(slow_lookup, idempotent=True), durable_tool(delete_account, idempotent=False)],
        sessions=store,
        modes=ROUTER,
    )
    s = agent.session()
    turn = s.prompt("support: where is my order?")
    assert started.wait(30)
    # The attack: a steer that the router would send to the admin mode joins the running turn.
    s.steer("please delete the account now")
    release.set()
    result = turn.result(timeout=30)
    assert deleted == []
    refusal = [m for m in s.history() if isinstance(m, ToolMessage) and m.name == "delete_account"]
    assert refusal and "refused" in refusal[0].text and "mode `support`" in refusal[0].text
    assert result.stop_reason == "end_turn"


def test_an_approval_never_re_routes_the_turn_in_a_session_and_on_a_plain_checkpointer(store: SessionStore) -> None:
    for plain in (True, False):
        deleted: list[str] = []
        lookup_order, delete_account, model = _attacker(deleted)
        tools = [durable_tool(lookup_order, idempotent=True), durable_tool(delete_account, idempotent=False)]
        approve = {"lookup_order": {"decisions": ["approve", "reject"], "question": "Look it up?"}}
        if plain:
            agent = Agent(llm=model, tools=tools, checkpointer=MemorySaver(), modes=ROUTER, interrupt_on=approve)
            paused = agent.invoke("support: where is order 42?", thread_id="t")
            assert isinstance(paused, dict) and paused["kind"] == "interrupt"
            agent.invoke(decision="approve", thread_id="t")
            history = agent.get_state("t").values["messages"]
        else:
            agent = Agent(llm=model, tools=tools, sessions=store, modes=ROUTER, interrupt_on=approve, name="appr")
            s = agent.session()
            assert s.prompt("support: where is order 42?").result().stop_reason == "interrupted"
            assert s.prompt(decision="approve").result(timeout=30).stop_reason == "end_turn"
            history = s.history()
        assert deleted == [], plain
        refused = [m for m in history if isinstance(m, ToolMessage) and m.name == "delete_account"]
        assert refused and "mode `support`" in refused[0].text


@dataclass
class Who:
    user: str


def _note_each_prompt(messages: list[BaseMessage], tools: list[Any]) -> Any:
    """Call ``whoami`` once per prompt, with the prompt's text as its note."""
    if isinstance(messages[-1], HumanMessage):
        return {"tool_calls": [{"name": "whoami", "args": {"note": messages[-1].text}}]}
    return "done"


def _recording_whoami(seen: list[str | None]) -> Any:
    @tool
    def whoami(note: str, runtime: ToolRuntime[Who]) -> str:
        """Say whose credentials this call runs with."""
        seen.append(runtime.context.user if runtime.context is not None else None)
        return "noted"

    return whoami


def _who_agent(store: SessionStore, whoami: Any, reply: Any = _note_each_prompt) -> Agent[Any]:
    """An agent on ``store`` whose one durable tool ``whoami`` records the context each call runs with."""
    return Agent(
        llm=FunctionChatModel(reply), tools=[durable_tool(whoami, idempotent=True)], sessions=store, context_schema=Who
    )


def test_context_belongs_to_the_session_object_that_was_given_it(store: SessionStore) -> None:
    seen: list[str | None] = []
    agent = _who_agent(store, _recording_whoami(seen))
    alice = agent.session("shared", context=Who("alice"))
    assert alice.prompt("as alice").result().stop_reason == "end_turn"
    # The attack: another handler (a webhook) opens the same session without credentials.
    anonymous = agent.session("shared")
    assert anonymous.prompt("as nobody").result().stop_reason == "end_turn"
    anonymous.steer("a steer as nobody")
    bob = agent.session("shared", context=Who("bob"))
    assert bob.prompt("as bob").result().stop_reason == "end_turn"
    assert seen[:2] == ["alice", None] and seen[-1] == "bob"
    assert "alice" not in seen[2:]


def test_a_yielded_turn_continued_by_a_prompt_runs_with_that_objects_context(store: SessionStore) -> None:
    seen: list[str | None] = []

    @tool
    def whoami(step: int, runtime: ToolRuntime[Who]) -> str:
        """Say whose credentials this call runs with."""
        seen.append(runtime.context.user if runtime.context is not None else None)
        time.sleep(0.3)  # so a yield_at a little ahead falls between model calls
        return "noted"

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        done = sum(isinstance(m, ToolMessage) for m in messages[start:])
        return {"tool_calls": [{"name": "whoami", "args": {"step": done + 1}}]} if done < 3 else "done"

    agent = _who_agent(store, whoami, reply)
    alice = agent.session("serverless", context=Who("alice"))
    first = alice.prompt("a long job", yield_at=time.time() + 0.15)
    assert first.result(timeout=30).stop_reason == "yielded"
    assert seen == ["alice"]
    # The next invocation (a new session object, its own credentials) sends the next prompt: the yielded turn
    # continues first, as when bob.resume() continues it, with bob's context; never alice's, never none.
    bob = agent.session("serverless", context=Who("bob"))
    assert bob.prompt("and then").result(timeout=30).stop_reason == "end_turn"
    assert first.result(timeout=30).stop_reason == "end_turn"
    assert seen == ["alice", "bob", "bob", "bob", "bob", "bob"]
    # Without a context the continued turn gets none (alice's never outlives her object's turn).
    again = alice.prompt("one more", yield_at=time.time() + 0.15)
    assert again.result(timeout=30).stop_reason == "yielded"
    del seen[:]
    assert agent.session("serverless").prompt("last").result(timeout=30).stop_reason == "end_turn"
    assert "alice" not in seen and None in seen


def test_a_turn_started_the_moment_it_is_stored_runs_with_its_objects_context(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, str | None]] = []
    release = threading.Event()

    @tool
    def whoami(note: str, runtime: ToolRuntime[Who]) -> str:
        """Say whose credentials this call runs with."""
        seen.append((note, runtime.context.user if runtime.context is not None else None))
        if note == "first":
            release.wait(10)
        return "noted"

    stored = store.accept_prompt

    def accept_then_stall(*args: Any, **kwargs: Any) -> Any:
        accepted = stored(*args, **kwargs)  # committed: the worker ending the turn ahead reads this one next ...
        release.set()
        deadline = time.monotonic() + 5
        while len(seen) < 2 and time.monotonic() < deadline:  # ... and runs it before prompt() goes on
            time.sleep(0.01)
        return accepted

    agent = _who_agent(store, whoami)
    first = agent.session("moment").prompt("first")
    while not seen:
        time.sleep(0.01)
    monkeypatch.setattr(store, "accept_prompt", accept_then_stall)
    second = agent.session("moment", context=Who("bob")).prompt("second")
    assert first.result(timeout=30).stop_reason == "end_turn"
    assert second.result(timeout=30).stop_reason == "end_turn"
    assert seen == [("first", None), ("second", "bob")]


@pytest.mark.parametrize("second", ["prompt", "stream"])
def test_a_queued_turn_not_yet_claimed_never_gets_the_next_callers_context(store: SessionStore, second: str) -> None:
    seen: list[str | None] = []
    agent = _who_agent(store, _recording_whoami(seen))
    hold, held = threading.Event(), threading.Event()

    async def busy_worker() -> None:  # the worker's loop is busy elsewhere: the turn below waits to be claimed
        held.set()
        hold.wait(10)

    store.engine.submit(busy_worker())  # type: ignore[attr-defined]
    assert held.wait(10)
    # A webhook's object without context queues a turn; before any worker claims it (no lease yet), bob's object
    # sends the next prompt (or reads the stream): the queued turn is not a crashed one and must not get bob's.
    anonymous = agent.session("race").prompt("as nobody")
    bob = agent.session("race", context=Who("bob"))
    if second == "prompt":
        bob.prompt("as bob")
    else:
        bob.stream(0)
    hold.set()
    _wait_idle(store, "race")
    assert anonymous.result(timeout=30).stop_reason == "end_turn"
    assert seen == ([None, "bob"] if second == "prompt" else [None])


@pytest.mark.parametrize("continuer", ["resume", "steer", "prompt"])
def test_a_turn_end_stored_late_never_drops_the_context_its_continuer_gave(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch, continuer: str
) -> None:
    """The end of a yielded turn is visible (committed) before the worker is back from storing it, as over a slow
    network: a resume() in that window hands the turn its context, which the finishing worker must not remove."""
    seen: list[str | None] = []

    @tool
    def whoami(step: int, runtime: ToolRuntime[Who]) -> str:
        """Say whose credentials this call runs with."""
        seen.append(runtime.context.user if runtime.context is not None else None)
        time.sleep(0.3)
        return "noted"

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and m.text != "go on")
        done = sum(isinstance(m, ToolMessage) for m in messages[start:])
        return {"tool_calls": [{"name": "whoami", "args": {"step": done + 1}}]} if done < 2 else "done"

    stored = store.end_turn
    back = threading.Event()

    def end_turn_slowly(*args: Any, **kwargs: Any) -> bool:
        given = stored(*args, **kwargs)  # committed: readers see the turn's end now
        back.wait(5)  # ... and the worker hears back only once the continuer acted
        return given

    monkeypatch.setattr(store, "end_turn", end_turn_slowly)
    agent = _who_agent(store, whoami, reply)
    first = agent.session("late", context=Who("alice")).prompt("work", yield_at=time.time() + 0.15)
    assert first.result(timeout=30).stop_reason == "yielded"
    bob = agent.session("late", context=Who("bob"))
    if continuer == "resume":
        bob.resume()
    elif continuer == "steer":
        bob.steer("go on")
    else:
        bob.prompt("go on")
    back.set()
    _wait_idle(store, "late")
    assert first.result(timeout=30).stop_reason == "end_turn"
    assert seen[0] == "alice" and seen[1] == "bob", seen


def _wait_idle(store: SessionStore, session_id: str) -> None:
    deadline = time.monotonic() + 30
    while store.busy(session_id):
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.stream(10**5000), "an int of 16610 bits"),
        (lambda s: s.astream(-(10**5000)), "an int of 16610 bits"),
        (lambda s: s.prompt("x", timeout=10**5000), "timeout"),
        (lambda s: s.prompt("x", yield_at=10**400), "yield_at"),
        (lambda s: s.resume(yield_at=-(10**400)), "yield_at"),
        (lambda s: s.steer(10**5000), "non-empty str"),
        (lambda s: s.prompt("x", message_id="m" * 100_000), r"message_id 'm{50,60}\.\.\. is not valid"),
        (lambda s: s.prompt("x", on_busy="z" * 100_000), r"on_busy='z{50,60}\.\.\. is not"),
        (lambda s: s.prompt([{"type": "text", "text": list(range(100_000))}]), r"not a str: \[0, 1, .{0,60}$"),
    ],
)
def test_a_huge_value_from_outside_is_a_short_user_error(store: SessionStore, call: Any, match: str) -> None:
    # An int past 4,300 digits cannot even be repr()'d (Python's int-to-str limit): still a UserError, and no error
    # message echoes a megabyte back.
    agent = Agent(llm=FunctionChatModel(lambda m, t: "ok"), sessions=store)
    s = agent.session()
    with pytest.raises(UserError, match=match) as caught:
        call(s)
    assert len(str(caught.value)) < 400
    with pytest.raises(UserError, match="an int of 16610 bits") as caught:
        agent.session(10**5000)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["abc\n", "abc\r\n", "\nabc", "a b", "x" * 129, "", "ümlaut", 7, None])
def test_ids_are_validated_whole(store: SessionStore, bad: Any) -> None:
    agent = Agent(llm=FunctionChatModel(lambda m, t: "ok"), sessions=store)
    if bad is not None:
        with pytest.raises(UserError, match="not valid"):
            agent.session(bad)
    with pytest.raises(UserError, match="message_id"):
        agent.session("fine").prompt("hi", message_id=bad if bad is not None else "a\n")
    with pytest.raises(UserError, match="message_id"):
        agent.session("fine").steer("hi", message_id=bad if bad is not None else "a\n")


@pytest.mark.parametrize("bad", [2**63, -1, 1.5, "3", True, None, 10**30])
def test_cursors_are_non_negative_63_bit_ints(store: SessionStore, bad: Any) -> None:
    agent = Agent(llm=FunctionChatModel(lambda m, t: "ok"), sessions=store)
    s = agent.session()
    s.prompt("hi").result()
    with pytest.raises(UserError, match="2\\*\\*63 - 1"):
        s.stream(bad)
    with pytest.raises(UserError, match="cursor"):
        s.astream(bad)
    assert list(s.stream(2**63 - 1)) == []  # past the end replays nothing
