from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from ai_utils.client import is_interrupt, is_tool_event
from ai_utils.exceptions import UserError
from ai_utils.streaming._adapter import ChunkAdapter, adapt, stream_kwargs
from ai_utils.streaming._decisions import to_resume

CFG = {"configurable": {"thread_id": "t1"}}
EMAIL = {"name": "send_email", "args": {"to": "bob", "body": "hi"}, "id": "e1"}
WEATHER = {"name": "get_weather", "args": {"city": "Oslo"}, "id": "w1"}


def stream(graph: Any, inputs: Any) -> list[Any]:
    return list(adapt(graph.stream(inputs, CFG, **stream_kwargs()), ChunkAdapter(show_tool_calls=True)))


def start(graph: Any) -> list[Any]:
    return stream(graph, {"messages": [("user", "mail bob")]})


def resume(graph: Any, decision: Any = None, decisions: Any = None) -> list[Any]:
    return stream(graph, to_resume(decision, decisions, pending=graph.get_state(CFG).interrupts))


def tool_ends(chunks: list[Any]) -> list[Any]:
    return [(c["tool_name"], c["status"], c["output"]) for c in chunks if is_tool_event(c) and c["phase"] == "end"]


@pytest.fixture
def gated(make_graph: Callable[..., Any]) -> Any:
    return make_graph([{"tool_calls": [EMAIL]}, "All handled."], interrupt_on={"send_email": True})


def test_approve_runs_the_tool_and_finishes_the_turn(gated: Any, outbox: Any) -> None:
    start(gated)
    chunks = resume(gated, "approve")

    assert outbox.sent == [{"to": "bob", "body": "hi"}]
    assert tool_ends(chunks) == [("send_email", "success", "sent to bob")]
    assert "".join(c for c in chunks if isinstance(c, str)) == "All handled."
    assert gated.get_state(CFG).interrupts == ()


def test_reject_with_a_reason_skips_the_tool_and_tells_the_model_why(gated: Any, outbox: Any) -> None:
    start(gated)
    chunks = resume(gated, {"type": "reject", "message": "not today"})

    assert outbox.sent == []
    ((name, status, output),) = tool_ends(chunks)
    assert (name, status) == ("send_email", "error")
    assert "not today" in output


def test_a_plain_reject_skips_the_tool(gated: Any, outbox: Any) -> None:
    start(gated)
    chunks = resume(gated, "reject")

    assert outbox.sent == []
    assert tool_ends(chunks)[0][1] == "error"


def test_edit_runs_the_tool_with_the_new_arguments(gated: Any, outbox: Any) -> None:
    start(gated)
    resume(gated, {"type": "edit", "args": {"to": "alice", "body": "hello"}})

    assert outbox.sent == [{"to": "alice", "body": "hello"}]


def test_respond_answers_in_place_of_the_tool(gated: Any, outbox: Any) -> None:
    start(gated)
    chunks = resume(gated, {"type": "respond", "message": "Bob is on holiday"})

    assert outbox.sent == []
    assert tool_ends(chunks) == [("send_email", "success", "Bob is on holiday")]


@pytest.fixture
def batch(make_graph: Callable[..., Any]) -> Any:
    return make_graph(
        [{"tool_calls": [WEATHER, EMAIL]}, "Done."],
        interrupt_on={"get_weather": {"allowed_decisions": ["approve", "reject"]}, "send_email": True},
    )


def test_a_batch_is_answered_in_item_order(batch: Any, outbox: Any) -> None:
    start(batch)
    chunks = resume(batch, decisions=["reject", {"type": "edit", "args": {"to": "carl", "body": "yo"}}])

    assert outbox.sent == [{"to": "carl", "body": "yo"}]
    assert sorted(tool_ends(chunks))[0][:2] == ("get_weather", "error")


def test_a_batch_can_be_answered_by_item_id(batch: Any, outbox: Any) -> None:
    (last,) = [c for c in start(batch) if is_interrupt(c)]
    weather_id, email_id = (item["id"] for item in last["items"])
    chunks = resume(batch, decisions={email_id: "approve", weather_id: "approve"})

    assert outbox.sent == [{"to": "bob", "body": "hi"}]
    assert sorted(tool_ends(chunks)) == [
        ("get_weather", "success", "Sunny in Oslo"),
        ("send_email", "success", "sent to bob"),
    ]


def test_one_decision_for_a_batch_is_refused_and_names_decisions_and_approve_all(batch: Any, outbox: Any) -> None:
    start(batch)
    with pytest.raises(UserError, match=r"2 items are pending.*`decisions=\[\.\.\.\]`.*approve_all\(interrupt\)"):
        resume(batch, "approve")
    assert outbox.sent == []


@pytest.mark.parametrize(
    ("decision", "decisions", "needle"),
    [
        (None, ["approve"], "1 answer(s) but 2 item(s)"),
        (None, ["approve", "approve", "approve"], "3 answer(s)"),
        (None, "approve", "must be a list or a mapping"),
        (None, {"nope": "approve"}, "no answer for pending item"),
        ({"type": "edit", "args": {}}, None, "2 items are pending"),
        ("reject", None, "2 items are pending"),
        (None, [{"type": "edit", "args": {"city": "Rome"}}, "approve"], "'edit' is not allowed for tool 'get_weather'"),
        ("approve", ["approve", "approve"], "exactly one of"),
        (None, None, "exactly one of"),
    ],
)
def test_wrong_answers_to_a_batch_are_user_errors_that_run_nothing(
    batch: Any, outbox: Any, decision: Any, decisions: Any, needle: str
) -> None:
    start(batch)
    with pytest.raises(UserError) as info:
        to_resume(decision, decisions, pending=batch.get_state(CFG).interrupts)

    assert needle in str(info.value)
    assert outbox.sent == []


def test_a_mapping_with_an_extra_key_is_a_user_error(batch: Any) -> None:
    (last,) = [c for c in start(batch) if is_interrupt(c)]
    answers = {item["id"]: "approve" for item in last["items"]} | {"ghost": "approve"}

    with pytest.raises(UserError, match="not pending: \\['ghost'\\]"):
        to_resume(decisions=answers, pending=batch.get_state(CFG).interrupts)


@pytest.mark.parametrize(
    ("decision", "needle"),
    [
        ("maybe", "Unknown decision 'maybe'"),
        ({"type": "postpone"}, "Unknown decision"),
        (42, "Unknown decision 42"),
        ("edit", "needs new arguments"),
        ({"type": "edit", "args": "to=carl"}, "needs new arguments"),
        ("respond", "needs a text"),
    ],
)
def test_malformed_decisions_are_user_errors(gated: Any, decision: Any, needle: str) -> None:
    start(gated)
    with pytest.raises(UserError, match=needle):
        to_resume(decision, pending=gated.get_state(CFG).interrupts)


def test_deciding_without_a_pending_interrupt_is_a_user_error() -> None:
    with pytest.raises(UserError, match="no pending interrupt"):
        to_resume("approve", pending=())


def test_per_call_interrupts_are_resumed_together_by_tool_call_id(make_graph: Callable[..., Any], outbox: Any) -> None:
    graph = make_graph(
        [{"tool_calls": [EMAIL, {**EMAIL, "args": {"to": "eve", "body": "x"}, "id": "e2"}]}, "Done."],
        interrupt_on={"send_email": {"allowed_decisions": ["approve", "reject"]}},
        mode="per_call",
    )
    start(graph)
    pending = graph.get_state(CFG).interrupts
    command = to_resume(decisions={"e1": "approve", "e2": {"type": "reject", "message": "spam"}}, pending=pending)

    assert set(command.resume) == {p.id for p in pending}  # several interrupts: a map keyed by interrupt id
    chunks = stream(graph, command)
    assert outbox.sent == [{"to": "bob", "body": "hi"}]
    assert sorted(tool_ends(chunks))[0][:2] == ("send_email", "error")
    assert graph.get_state(CFG).interrupts == ()


class _State(TypedDict):
    answer: str


def test_a_plain_interrupt_gets_the_answer_unchanged() -> None:
    def ask(state: _State) -> dict[str, Any]:
        return {"answer": interrupt("Which city?")}

    builder = StateGraph(_State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    graph = builder.compile(checkpointer=InMemorySaver())
    graph.invoke({"answer": ""}, CFG)

    graph.invoke(to_resume("Lisbon", pending=graph.get_state(CFG).interrupts), CFG)

    assert graph.get_state(CFG).values["answer"] == "Lisbon"


def test_a_subagent_interrupt_is_resumed_from_the_root_thread(outbox: Any, tools: list[Any]) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.tools import tool

    from ai_utils.testing import FakeChatModel

    inner = create_agent(
        FakeChatModel([{"tool_calls": [EMAIL]}, "Mailed."]),
        tools=tools,
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True})],
        name="mailer",
    )

    @tool
    def delegate(task: str) -> str:
        """Hand a task to the mailer subagent."""
        return str(inner.invoke({"messages": [("user", task)]})["messages"][-1].text)

    boss = create_agent(
        FakeChatModel([{"tool_calls": [{"name": "delegate", "args": {"task": "mail bob"}}]}, "Boss done."]),
        tools=[delegate],
        checkpointer=InMemorySaver(),
    )
    (asked,) = [c for c in start(boss) if is_interrupt(c)]
    chunks = resume(boss, decisions={asked["id"]: "approve"})

    assert asked["tool_name"] == "send_email"
    assert outbox.sent == [{"to": "bob", "body": "hi"}]
    assert tool_ends(chunks) == [("delegate", "success", "Mailed.")]
    assert "".join(c for c in chunks if isinstance(c, str)) == "Boss done."
