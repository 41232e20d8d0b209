"""The tool loop of SPEC §19 on `Agent`: tool errors reach the model, loop limits, ToolResult, AgentRun, traces."""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils import (
    Agent,
    AgentAction,
    AgentRun,
    AgentTraceEvent,
    Gateway,
    MemoryAuditSink,
    Route,
    ToolResult,
    UserError,
)
from ai_utils.client import is_interrupt, is_tool_event
from ai_utils.testing import FakeChatModel, FunctionChatModel

SENTINEL = "ctx-sentinel-7f3a9"
KEY = "sk-proj-" + "Ab3" * 16
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24


def call(name: str, /, **args: Any) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": name, "args": args}]}


@dataclass
class Shop:
    token: str


CONTEXT = Shop(token=SENTINEL)


def charge(order_id: str, runtime: ToolRuntime[Shop]) -> str:
    """Charge an order."""
    raise RuntimeError(f"payment backend down for {order_id} (token {runtime.context.token}, key {KEY})")


def tool_results(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


class Choices(BaseCallbackHandler):
    """Records each model call's bound ``tool_choice`` (what the provider would receive)."""

    def __init__(self) -> None:
        self.choices: list[Any] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.choices.append(kwargs.get("invocation_params", {}).get("tool_choice"))


# --- a tool that raises reaches the model -------------------------------------------------------------------


def _assert_error_result(result: ToolMessage) -> None:
    assert result.status == "error"
    assert result.text.startswith("RuntimeError: payment backend down for A-1 (token ")
    assert SENTINEL not in result.text and "[REDACTED:context]" in result.text
    assert KEY not in result.text and "[REDACTED:openai_api_key]" in result.text


def test_a_raising_tool_reaches_the_model_as_a_failed_result_and_the_run_goes_on() -> None:
    llm = FakeChatModel([call("charge", order_id="A-1"), "The payment system is down; try later."])
    agent = Agent(llm=llm, tools=[charge], context_schema=Shop)
    assert agent.invoke("Charge A-1", context=CONTEXT) == "The payment system is down; try later."
    (result,) = tool_results(llm.calls[1])
    _assert_error_result(result)


async def test_async_stream_shows_the_failed_call_with_status_error() -> None:
    llm = FakeChatModel([call("charge", order_id="A-1"), "Sorry."])
    agent = Agent(llm=llm, tools=[charge], checkpointer=InMemorySaver(), context_schema=Shop)
    chunks = [c async for c in agent.astream("x", thread_id="t", context=CONTEXT, show_tool_calls=True)]
    end = next(c for c in chunks if is_tool_event(c) and c["phase"] == "end")
    assert end["status"] == "error" and end["output"].startswith("RuntimeError: payment backend down")
    assert SENTINEL not in json.dumps(chunks) and KEY not in json.dumps(chunks)
    assert "".join(c for c in chunks if isinstance(c, str)) == "Sorry."
    # The thread keeps the failed result, and the next turn goes on from it.
    _assert_error_result(tool_results(agent.get_state("t").values["messages"])[0])


def test_sync_stream_end_chunk_has_status_error() -> None:
    agent = Agent(llm=FakeChatModel([call("charge", order_id="A-1"), "Sorry."]), tools=[charge], context_schema=Shop)
    chunks = agent.stream("x", context=CONTEXT, show_tool_calls=True)
    ends = [c for c in chunks if is_tool_event(c) and c["phase"] == "end"]
    assert [e["status"] for e in ends] == ["error"]


def test_tool_errors_raise_ends_the_run_with_the_tools_exception() -> None:
    agent = Agent(
        llm=FakeChatModel([call("charge", order_id="A-1"), "never"]),
        tools=[charge],
        tool_errors="raise",
        context_schema=Shop,
    )
    with pytest.raises(RuntimeError, match="payment backend down"):
        agent.invoke("x", context=CONTEXT)


def test_a_long_error_is_cut_to_2000_characters() -> None:
    def noisy() -> str:
        """Fail loudly."""
        raise ValueError("x" * 5000)

    llm = FakeChatModel([call("noisy"), "ok"])
    Agent(llm=llm, tools=[noisy]).invoke("x")
    (result,) = tool_results(llm.calls[1])
    assert len(result.text) == 2000 and result.text.startswith("ValueError: xxx")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_an_error_whose_text_cannot_be_read_still_reaches_the_model() -> None:
    def odd() -> str:
        """Fail oddly."""
        raise Unprintable()

    llm = FakeChatModel([call("odd"), "It failed."])
    assert Agent(llm=llm, tools=[odd]).invoke("x") == "It failed."
    (result,) = tool_results(llm.calls[1])
    assert result.status == "error" and result.text.startswith("Unprintable")


def test_a_context_value_quoted_with_escapes_in_the_message_is_redacted_too() -> None:
    quoted = Shop(token="it's-" + SENTINEL + "\\path")  # a repr escapes both the quote and the backslash

    def charge(runtime: ToolRuntime[Shop]) -> str:
        """Charge."""
        raise RuntimeError(f"bad context {runtime.context!r} / {json.dumps(runtime.context.token)}")

    llm = FakeChatModel([call("charge"), "ok"])
    Agent(llm=llm, tools=[charge], context_schema=Shop).invoke("x", context=quoted)
    (result,) = tool_results(llm.calls[1])
    assert SENTINEL not in result.text and result.text.count("[REDACTED:context]") == 2, result.text


def test_a_user_error_inside_a_tool_still_ends_the_run() -> None:
    def bad() -> ToolResult:
        """Return a result with a status that does not exist."""
        return ToolResult("maybe", "?")  # type: ignore[arg-type]

    agent = Agent(llm=FakeChatModel([call("bad"), "never"]), tools=[bad])
    with pytest.raises(UserError, match="'maybe'"):
        agent.invoke("x")


def test_an_error_a_middleware_raises_is_not_a_tool_error_and_ends_the_run() -> None:
    def explode(name: str, result: Any) -> None:
        raise RuntimeError("after-hook failed")

    agent = Agent(llm=FakeChatModel([call("lookup", term="x"), "never"]), tools=[lookup], after_tool_call=explode)
    with pytest.raises(RuntimeError, match="after-hook failed"):
        agent.invoke("x")


# --- ToolResult and AgentAction -----------------------------------------------------------------------------


def book(day: str) -> ToolResult:
    """Propose a booking."""
    return ToolResult("ok", f"Proposed {day}.", data={"day": day}, action=AgentAction("booking", {"day": day}))


def test_a_tool_result_reaches_the_model_as_json_and_its_action_reaches_the_caller_only() -> None:
    llm = FakeChatModel([call("book", day="Mon"), "Booked Monday (pending your click)."])
    run = Agent(llm=llm, tools=[book]).invoke("Book Monday", details=True)
    (result,) = tool_results(llm.calls[1])
    assert json.loads(result.text) == {"status": "ok", "message": "Proposed Mon.", "data": {"day": "Mon"}}
    assert result.status == "success" and result.artifact is None
    assert run.actions == [AgentAction("booking", {"day": "Mon"})]
    assert all("booking" not in str(m.content) for m in llm.calls[1])


class Booker(BaseTool):
    """A tool written as a `BaseTool` subclass (not a function), as tool libraries ship them."""

    name: str = "book"
    description: str = "Book a day."

    def _run(self, day: str) -> ToolResult:
        return book(day)

    async def _arun(self, day: str) -> ToolResult:
        return ToolResult("error", f"No slot on {day}.", action=AgentAction("waitlist", {"day": day}))


def test_a_base_tool_subclass_may_return_a_tool_result_too() -> None:
    llm = FakeChatModel([call("book", day="Mon"), "Done."])
    run = Agent(llm=llm, tools=[Booker()]).invoke("Book", details=True)
    (result,) = tool_results(llm.calls[1])
    assert json.loads(result.text) == {"status": "ok", "message": "Proposed Mon.", "data": {"day": "Mon"}}
    assert result.status == "success" and result.artifact is None
    assert run.actions == [AgentAction("booking", {"day": "Mon"})]
    assert all("booking" not in str(m.content) for m in llm.calls[1])


async def test_a_base_tool_subclass_runs_its_own_arun_once_in_async_runs() -> None:
    llm = FakeChatModel([call("book", day="Mon"), "Done."])
    run = await Agent(llm=llm, tools=[Booker()]).ainvoke("Book", details=True)
    (result,) = tool_results(llm.calls[1])
    assert json.loads(result.text) == {"status": "error", "message": "No slot on Mon.", "data": None}
    assert result.status == "error" and result.artifact is None
    assert run.actions == [AgentAction("waitlist", {"day": "Mon"})]
    assert all("waitlist" not in str(m.content) for m in llm.calls[1])


def test_a_tool_result_with_status_error_is_a_failed_result() -> None:
    def find(order_id: str) -> ToolResult:
        """Find an order."""
        return ToolResult("error", f"No order {order_id}.")

    llm = FakeChatModel([call("find", order_id="Z"), "Not found."])
    Agent(llm=llm, tools=[find]).invoke("x")
    (result,) = tool_results(llm.calls[1])
    assert result.status == "error" and json.loads(result.text)["status"] == "error"


async def test_tool_result_images_reach_a_model_that_takes_images_as_image_blocks() -> None:
    async def snapshot() -> ToolResult:
        """Take a snapshot."""
        return ToolResult("ok", "Here it is.", images=[PNG, "data:image/png;base64," + base64.b64encode(PNG).decode()])

    llm = FakeChatModel([call("snapshot"), "A black square."])
    await Agent(llm=llm, tools=[snapshot]).ainvoke("Look")
    (result,) = tool_results(llm.calls[1])
    assert isinstance(result.content, list)
    text, *images = result.content
    assert isinstance(text, dict) and json.loads(text["text"])["message"] == "Here it is."
    assert images == [{"type": "image", "base64": base64.b64encode(PNG).decode(), "mime_type": "image/png"}] * 2


def test_a_model_without_image_support_gets_a_note_instead_of_the_images() -> None:
    def snapshot() -> ToolResult:
        """Take a snapshot."""
        return ToolResult("ok", "Here it is.", images=[PNG])

    llm = FakeChatModel([call("snapshot"), "ok"], profile={"image_tool_message": False})
    Agent(llm=llm, tools=[snapshot]).invoke("Look")
    (result,) = tool_results(llm.calls[1])
    assert isinstance(result.content, str) and "1 image(s) left out" in result.content


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: ToolResult("maybe", "x"), "'maybe'"),  # type: ignore[arg-type]
        (lambda: ToolResult("ok", "x", action={"type": "booking"}), "{'type': 'booking'}"),  # type: ignore[arg-type]
        (lambda: ToolResult("ok", "x", data=object()), "object"),
        (lambda: ToolResult("ok", "x", data={"mean": float("nan")}), "{'mean': nan}"),  # JSON has no NaN
        (lambda: ToolResult("ok", "x", data=[float("inf")]), "[inf]"),
        (lambda: ToolResult("ok", "x", images=[b"GIF? no"]), "images[0]"),
        (lambda: ToolResult("ok", "x", images=PNG), "list of images"),  # type: ignore[arg-type]
        (lambda: AgentAction("", {}), "''"),
        (lambda: AgentAction("booking", ["day"]), "['day']"),  # type: ignore[arg-type]
    ],
)
def test_bad_tool_results_and_actions_are_user_errors_naming_the_value(make: Any, named: str) -> None:
    with pytest.raises(UserError) as info:
        make()
    assert named in str(info.value)


# --- loop limits --------------------------------------------------------------------------------------------


def lookup(term: str) -> str:
    """Look a term up."""
    return f"found {term}"


def always_tools(messages: list[BaseMessage], tools: list[Any]) -> Any:
    return call("lookup", term=str(len(messages)))


def test_max_iterations_defaults_to_5_then_the_model_must_answer() -> None:
    choices = Choices()
    llm = FunctionChatModel(always_tools)
    agent = Agent(llm=llm, tools=[lookup], callbacks=[choices])
    assert agent.max_iterations == 5
    run = agent.invoke("loop", details=True)
    assert len(llm.calls) == 6 and choices.choices == [None] * 5 + ["none"]
    # The forced answer's tool call is dropped: the thread holds no call without a result.
    assert run.response_message is not None and not run.response_message.tool_calls
    assert len(tool_results(llm.calls[-1])) == 5


def test_max_iterations_none_lifts_the_limit() -> None:
    def seven_rounds(messages: list[BaseMessage], tools: list[Any]) -> Any:
        return call("lookup", term="x") if len(tool_results(messages)) < 7 else "done"

    llm = FunctionChatModel(seven_rounds)
    assert Agent(llm=llm, tools=[lookup], max_iterations=None).invoke("x") == "done"
    assert len(llm.calls) == 8


def test_max_iterations_counts_on_across_a_resumed_approval() -> None:
    choices = Choices()
    agent = Agent(
        llm=FunctionChatModel(always_tools),
        tools=[lookup],
        checkpointer=InMemorySaver(),
        interrupt_on={"lookup": True},
        max_iterations=2,
        callbacks=[choices],
    )
    assert is_interrupt(agent.invoke("x", thread_id="t"))
    assert is_interrupt(agent.invoke(thread_id="t", decision="approve"))
    agent.invoke(thread_id="t", decision="approve")
    assert choices.choices == [None, None, "none"]


def test_decide_followup_tool_choice_sets_each_follow_up_calls_tool_choice() -> None:
    asked: list[tuple[int, int]] = []
    plan = {1: "required", 2: "lookup", 3: "none"}

    def decide(iteration: int, messages: list[BaseMessage]) -> str:
        asked.append((iteration, len(messages)))
        return plan[iteration]

    def model(messages: list[BaseMessage], tools: list[Any]) -> Any:
        return call("lookup", term="x") if len(tool_results(messages)) < 3 else "done"

    choices = Choices()
    agent = Agent(llm=FunctionChatModel(model), tools=[lookup], decide_followup_tool_choice=decide, callbacks=[choices])
    assert agent.invoke("x") == "done"
    assert choices.choices == [None, "required", "lookup", "none"]
    assert [a[0] for a in asked] == [1, 2, 3] and asked[0][1] == 3  # system, user, AI, tool -> 3 without system


def test_decide_followup_tool_choice_naming_an_unknown_tool_is_a_user_error() -> None:
    agent = Agent(
        llm=FakeChatModel([call("lookup", term="x"), "never"]),
        tools=[lookup],
        decide_followup_tool_choice=lambda i, m: "delete_everything",
    )
    with pytest.raises(UserError, match="'delete_everything'"):
        agent.invoke("x")


def test_allowed_tools_narrows_one_run() -> None:
    ran: list[str] = []

    def drop_table(name: str) -> str:
        """Drop a table."""
        ran.append(name)
        return "dropped"

    seen: list[list[str]] = []

    def model(messages: list[BaseMessage], tools: list[Any]) -> Any:
        seen.append([t["function"]["name"] for t in tools])
        return call("drop_table", name="users") if len(seen) == 1 else "I may only look things up."

    llm = FunctionChatModel(model)
    agent = Agent(llm=llm, tools=[lookup, drop_table])
    assert agent.invoke("Drop users", allowed_tools=["lookup"]) == "I may only look things up."
    assert seen[0] == ["lookup"] and ran == []
    (refused,) = tool_results(llm.calls[1])
    assert refused.status == "error" and "not among the tools allowed" in refused.text
    seen.clear()
    agent.invoke("Drop users")  # the next run has every tool again
    assert seen[0] == ["lookup", "drop_table"] and ran == ["users"]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_iterations": 0}, "max_iterations=0"),
        ({"max_iterations": True}, "max_iterations=True"),
        ({"tool_errors": "ignore"}, "'ignore'"),
        ({"parallel_tools": "yes"}, "'yes'"),
        ({"on_trace": "stdout"}, "'stdout'"),
        ({"decide_followup_tool_choice": "auto"}, "'auto'"),
    ],
)
def test_bad_tool_loop_options_are_user_errors_naming_the_value(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(UserError) as info:
        Agent(llm=FakeChatModel(["x"]), **kwargs)
    assert named in str(info.value)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"allowed_tools": ["lookup", "nope"]}, "['nope']"),
        ({"allowed_tools": "lookup"}, "'lookup'"),
        ({"trace_id": ""}, "''"),
        ({"trace_id": "abc\n"}, "'abc\\n'"),
    ],
)
def test_bad_run_options_are_user_errors_naming_the_value(options: dict[str, Any], named: str) -> None:
    agent = Agent(llm=FakeChatModel(["x"]), tools=[lookup])
    with pytest.raises(UserError) as info:
        agent.invoke("x", **options)
    assert named in str(info.value)


# --- the run record -----------------------------------------------------------------------------------------


def test_details_returns_the_run_record_with_summed_usage_and_the_audit_rows_trace_id() -> None:
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", "fake", "fake-chat-model")], audit=sink, enforce_actor=False)
    llm = FakeChatModel([call("book", day="Mon"), "Booked."])
    agent = Agent(llm=llm, tools=[book], callbacks=[gateway.callback("support")])
    run = agent.invoke("Book Monday", details=True)
    assert isinstance(run, AgentRun)
    assert run.output == "Booked." and isinstance(run.response_message, AIMessage)
    assert run.response_message.text == "Booked." and run.iterations == 2 and run.model == "fake-chat-model"
    assert run.actions == [AgentAction("booking", {"day": "Mon"})]
    assert run.usage is not None
    assert (
        run.usage["total_tokens"] == sum((e.usage or {}).get("total_tokens", 0) for e in sink.entries)
        and len(sink.entries) == 2
    )
    assert {e.metadata["trace_id"] for e in sink.entries} == {run.trace_id}


def test_a_given_trace_id_names_the_run_in_audit_rows_and_traces() -> None:
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", "fake", "fake-chat-model")], audit=sink, enforce_actor=False)
    events: list[AgentTraceEvent] = []
    agent = Agent(llm=FakeChatModel(["Hi."]), callbacks=[gateway.callback("support")], on_trace=events.append)
    run = agent.invoke("Hi", details=True, trace_id="req-42")
    assert run.trace_id == "req-42" and [e.metadata["trace_id"] for e in sink.entries] == ["req-42"]
    assert {e.trace_id for e in events} == {"req-42"}


async def test_ainvoke_details_and_an_interrupt_stays_an_interrupt() -> None:
    agent = Agent(
        llm=FakeChatModel([call("lookup", term="x"), "found it"]),
        tools=[lookup],
        checkpointer=InMemorySaver(),
        interrupt_on={"lookup": True},
    )
    assert is_interrupt(await agent.ainvoke("x", thread_id="t", details=True))
    run = await agent.ainvoke(thread_id="t", decision="approve", details=True)
    assert isinstance(run, AgentRun) and run.output == "found it" and run.iterations == 1


# --- on_trace -----------------------------------------------------------------------------------------------


def test_on_trace_gets_every_step_in_order_without_context_or_secrets() -> None:
    events: list[AgentTraceEvent] = []
    agent = Agent(
        llm=FakeChatModel([call("charge", order_id="A-1"), "Sorry."]),
        tools=[charge],
        on_trace=events.append,
        name="shop",
        context_schema=Shop,
    )
    run = agent.invoke("x", context=CONTEXT, details=True)
    assert [e.type for e in events] == [
        "started",
        "model.requested",
        "model.responded",
        "tool.started",
        "tool.finished",
        "model.requested",
        "model.responded",
        "completed",
    ]
    assert {e.trace_id for e in events} == {run.trace_id} and {e.agent for e in events} == {"shop"}
    finished = events[4].data
    assert (finished["tool_name"], finished["status"]) == ("charge", "error")
    assert events[-1].data["iterations"] == 2 and events[2].data["tool_calls"] == ["charge"]
    assert SENTINEL not in repr(events) and KEY not in repr(events) and "A-1" not in repr(events)


async def test_an_async_sink_gets_the_events_in_order_before_ainvoke_returns() -> None:
    import asyncio

    events: list[str] = []

    async def sink(event: AgentTraceEvent) -> None:
        await asyncio.sleep(0)
        events.append(event.type)

    agent = Agent(llm=FakeChatModel([call("lookup", term="x"), "ok"]), tools=[lookup], on_trace=sink)
    await agent.ainvoke("x")
    assert events == [
        "started",
        "model.requested",
        "model.responded",
        "tool.started",
        "tool.finished",
        "model.requested",
        "model.responded",
        "completed",
    ]


def test_a_failing_run_ends_with_a_failed_event() -> None:
    events: list[AgentTraceEvent] = []

    def broken(messages: list[BaseMessage], tools: list[Any]) -> Any:
        raise ConnectionError("provider down")

    with pytest.raises(ConnectionError):
        Agent(llm=FunctionChatModel(broken), on_trace=events.append).invoke("x")
    assert [e.type for e in events] == ["started", "model.requested", "failed"]
    assert events[-1].data == {"error_type": "ConnectionError"}


def test_a_raising_sink_is_logged_and_never_fails_the_run(caplog: pytest.LogCaptureFixture) -> None:
    def sink(event: AgentTraceEvent) -> None:
        raise RuntimeError(f"sink broke on {SENTINEL}")

    agent = Agent(llm=FakeChatModel([call("lookup", term="x"), "ok"]), tools=[lookup], on_trace=sink)
    with caplog.at_level(logging.WARNING, logger="ai_utils"):
        assert agent.invoke("x", context=CONTEXT) == "ok"
    failures = [r for r in caplog.records if "on_trace sink raised RuntimeError" in r.getMessage()]
    assert len(failures) == 8
    assert SENTINEL not in caplog.text
