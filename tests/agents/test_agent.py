"""Agent on create_agent: answers, tools, streaming protocol, structured output, approval, errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from ai_utils import Agent, ToolRegistry, UserError
from ai_utils.client import is_interrupt, is_reasoning_event, is_tool_event
from ai_utils.testing import FakeChatModel, FunctionChatModel


class Ledger:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def tools(ledger: Ledger) -> list[Any]:
    @tool
    def get_weather(city: str) -> str:
        """Return the weather for a city."""
        ledger.calls.append(("get_weather", {"city": city}))
        return f"{city}: sunny"

    @tool
    def send_mail(to: str, body: str) -> str:
        """Send an e-mail."""
        ledger.calls.append(("send_mail", {"to": to, "body": body}))
        return f"sent to {to}"

    return [get_weather, send_mail]


def weather_call(city: str = "Berlin", **extra: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "get_weather", "args": {"city": city}}], **extra}


def test_invoke_runs_the_tool_and_returns_the_final_answer(tools: list[Any], ledger: Ledger) -> None:
    llm = FakeChatModel([weather_call(), "Sonnig in Berlin."])
    agent = Agent(llm=llm, prompt="Be brief.", tools=tools)

    assert agent.invoke("Wetter in Berlin?") == "Sonnig in Berlin."
    assert ledger.calls == [("get_weather", {"city": "Berlin"})]
    second_call = llm.calls[1]
    assert second_call[0].content == "Be brief."
    assert isinstance(second_call[-1], ToolMessage) and second_call[-1].content == "Berlin: sunny"


def test_plain_functions_and_registry_tools_are_accepted() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    class Pair(BaseModel):
        a: int
        b: int

    registry = ToolRegistry([{"name": "mul", "description": "Multiply.", "schema": Pair, "func": lambda a, b: a * b}])
    llm = FakeChatModel(
        [
            {"tool_calls": [{"name": "add", "args": {"a": 8, "b": 13}}, {"name": "mul", "args": {"a": 2, "b": 3}}]},
            "21 and 6",
        ]
    )
    agent = Agent(llm=llm, tools=[add, *registry.all_tools])

    assert agent.invoke("8+13 and 2*3?") == "21 and 6"
    results = sorted(m.content for m in llm.calls[1] if isinstance(m, ToolMessage))
    assert results == ["21", "6"]


def test_stream_yields_text_only_unless_events_are_asked_for(tools: list[Any]) -> None:
    script = [weather_call(reasoning="I need the weather."), "Es ist sonnig in Berlin."]

    plain = list(Agent(llm=FakeChatModel(script), tools=tools).stream("Wetter?"))
    assert all(isinstance(c, str) for c in plain)
    assert len(plain) > 1 and "".join(plain) == "Es ist sonnig in Berlin."

    rich = list(
        Agent(llm=FakeChatModel(script), tools=tools).stream("Wetter?", show_tool_calls=True, show_reasoning=True)
    )
    events = [c for c in rich if not isinstance(c, str)]
    assert [e["text"] for e in events if is_reasoning_event(e)] and "".join(
        e["text"] for e in events if is_reasoning_event(e)
    ) == "I need the weather."
    tool_events = [e for e in events if is_tool_event(e)]
    assert [(e["phase"], e["tool_name"]) for e in tool_events] == [("start", "get_weather"), ("end", "get_weather")]
    assert tool_events[0]["args"] == {"city": "Berlin"}
    assert tool_events[1]["output"] == "Berlin: sunny" and tool_events[1]["id"] == tool_events[0]["id"]
    assert "".join(c for c in rich if isinstance(c, str)) == "Es ist sonnig in Berlin."


async def test_astream_and_ainvoke_match_the_sync_twins(tools: list[Any], ledger: Ledger) -> None:
    agent = Agent(llm=FakeChatModel([weather_call(), "Sonnig.", weather_call("Rom"), "Warm."]), tools=tools)
    chunks = [c async for c in agent.astream("Berlin?", show_tool_calls=True)]
    assert "".join(c for c in chunks if isinstance(c, str)) == "Sonnig."
    assert [c["phase"] for c in chunks if is_tool_event(c)] == ["start", "end"]
    assert await agent.ainvoke("Rom?") == "Warm."
    assert ledger.calls == [("get_weather", {"city": "Berlin"}), ("get_weather", {"city": "Rom"})]


def test_structured_output_returns_a_validated_model(tools: list[Any]) -> None:
    class Answer(BaseModel):
        answer: str
        confidence: float

    llm = FakeChatModel(
        [weather_call(), {"tool_calls": [{"name": "Answer", "args": {"answer": "sunny", "confidence": 0.9}}]}]
    )
    result = Agent(llm=llm, tools=tools, output=Answer).invoke("Wetter?")
    assert result == Answer(answer="sunny", confidence=0.9)


def test_checkpointer_keeps_the_conversation_per_thread(tools: list[Any]) -> None:
    def reply(messages: list[Any], tools: list[Any]) -> str:
        said = " ".join(str(m.content) for m in messages)
        return "Du heisst Max." if "Ich heisse Max" in said and "Wie heisse ich" in said else "Hallo!"

    agent = Agent(llm=FunctionChatModel(reply), tools=tools, checkpointer=InMemorySaver())
    assert agent.invoke("Ich heisse Max.", thread_id="a") == "Hallo!"
    assert agent.invoke("Wie heisse ich?", thread_id="a") == "Du heisst Max."
    assert agent.invoke("Wie heisse ich?", thread_id="b") == "Hallo!"


def approval_agent(tools: list[Any], script: list[Any], **interrupt: Any) -> Agent:
    return Agent(
        llm=FakeChatModel(script),
        tools=tools,
        checkpointer=InMemorySaver(),
        interrupt_on={"send_mail": interrupt or {"decisions": ["approve", "edit", "reject"], "question": "Send it?"}},
    )


MAIL = {"tool_calls": [{"name": "send_mail", "args": {"to": "a@x.de", "body": "Hi"}}]}


def test_approval_pauses_then_approve_runs_the_tool_once(tools: list[Any], ledger: Ledger) -> None:
    agent = approval_agent(tools, [MAIL, "Mail ist raus."])

    paused = agent.invoke("Schick die Mail", thread_id="t")
    assert is_interrupt(paused) and "items" not in paused
    assert paused["question"] == "Send it?" and paused["tool_name"] == "send_mail"
    assert paused["args"] == {"to": "a@x.de", "body": "Hi"} and paused["decisions"] == ["approve", "edit", "reject"]
    assert ledger.calls == []

    chunks = list(agent.stream(thread_id="t", decision="approve", show_tool_calls=True))
    assert ledger.calls == [("send_mail", {"to": "a@x.de", "body": "Hi"})]
    assert [c["phase"] for c in chunks if is_tool_event(c)] == ["end"]
    assert "".join(c for c in chunks if isinstance(c, str)) == "Mail ist raus."


def test_reject_with_message_never_runs_the_tool_and_tells_the_model(tools: list[Any], ledger: Ledger) -> None:
    agent = approval_agent(tools, [MAIL, "Okay, nicht gesendet."])
    agent.invoke("Schick die Mail", thread_id="t")
    result = agent.invoke(thread_id="t", decision={"type": "reject", "message": "Falscher Empfänger"})
    assert result == "Okay, nicht gesendet." and ledger.calls == []
    tool_results = [m for m in agent.llm.calls[1] if isinstance(m, ToolMessage)]  # type: ignore[attr-defined]
    assert "Falscher Empfänger" in str(tool_results[-1].content)


def test_edit_runs_the_tool_with_the_edited_args(tools: list[Any], ledger: Ledger) -> None:
    agent = approval_agent(tools, [MAIL, "Gesendet."])
    agent.invoke("Schick die Mail", thread_id="t")
    agent.invoke(thread_id="t", decision={"type": "edit", "args": {"to": "b@x.de", "body": "Hallo"}})
    assert ledger.calls == [("send_mail", {"to": "b@x.de", "body": "Hallo"})]


def test_parallel_calls_pause_as_one_batch_and_take_decisions_by_position_or_id(
    tools: list[Any], ledger: Ledger
) -> None:
    two = {
        "tool_calls": [
            {"name": "send_mail", "args": {"to": "a@x.de", "body": "1"}},
            {"name": "send_mail", "args": {"to": "b@x.de", "body": "2"}},
        ]
    }
    agent = approval_agent(tools, [two, "Eine gesendet.", two, "Wieder eine."], decisions=["approve", "reject"])
    batch = agent.invoke("Zwei Mails", thread_id="t")
    assert is_interrupt(batch) and len(batch["items"]) == 2  # type: ignore[typeddict-item]
    agent.invoke(thread_id="t", decisions=["reject", "approve"])
    assert ledger.calls == [("send_mail", {"to": "b@x.de", "body": "2"})]

    batch = agent.invoke("Nochmal", thread_id="t")
    items = batch["items"]  # type: ignore[index]
    agent.invoke(thread_id="t", decisions={items[0]["id"]: "approve", items[1]["id"]: "reject"})
    assert ledger.calls[-1] == ("send_mail", {"to": "a@x.de", "body": "1"})


def test_question_may_be_a_function_of_the_tool_call(tools: list[Any]) -> None:
    agent = approval_agent(tools, [MAIL], decisions=["approve"], question=lambda call: f"Mail an {call['args']['to']}?")
    paused = agent.invoke("Mail", thread_id="t")
    assert paused["question"] == "Mail an a@x.de?"  # type: ignore[index]


def test_the_same_interrupt_is_streamed_once(tools: list[Any]) -> None:
    agent = approval_agent(tools, [MAIL])
    chunks = list(agent.stream("Mail", thread_id="t", show_tool_calls=True))
    assert sum(1 for c in chunks if is_interrupt(c)) == 1 and is_interrupt(chunks[-1])


@dataclass
class Ctx:
    api_token: str


def test_context_reaches_tools_but_not_the_checkpoint() -> None:
    seen: list[Any] = []

    @tool
    def whoami(runtime: ToolRuntime[Ctx]) -> str:
        """Tell who is asking."""
        seen.append(runtime.context)
        return "ok"

    saver = InMemorySaver()
    agent = Agent(
        context_schema=Ctx,
        llm=FakeChatModel([{"tool_calls": [{"name": "whoami", "args": {}}]}, "done"]),
        tools=[whoami],
        checkpointer=saver,
    )
    agent.invoke("who?", thread_id="t", context=Ctx(api_token="SECRET-123"))
    assert seen == [Ctx(api_token="SECRET-123")]
    stored = repr(list(saver.storage.items())) + repr(saver.writes)
    assert "SECRET-123" not in stored


@pytest.mark.parametrize(
    ("kwargs", "call", "message"),
    [
        ({"checkpointer": InMemorySaver()}, {"input": "hi"}, "thread_id"),
        ({"checkpointer": InMemorySaver()}, {"input": "hi", "thread_id": "t", "decision": "approve"}, "not both"),
        ({}, {"decision": "approve"}, "needs a checkpointer"),
        ({}, {}, "nothing to run"),
        ({"checkpointer": InMemorySaver()}, {"thread_id": "t", "decision": "approve"}, "no pending interrupt"),
    ],
)
def test_bad_calls_raise_clear_user_errors(kwargs: dict[str, Any], call: dict[str, Any], message: str) -> None:
    agent = Agent(llm=FakeChatModel(["x"]), **kwargs)
    with pytest.raises(UserError, match=message):
        agent.invoke(**call)
    with pytest.raises(UserError, match=message):
        list(agent.stream(**call))


def test_a_misspelt_run_option_is_a_user_error_naming_the_closest_and_the_agent_still_runs() -> None:
    agent = Agent(llm=FakeChatModel(["ok"]), checkpointer=InMemorySaver())
    with pytest.raises(
        UserError, match=r"Agent.invoke got unknown argument\(s\) thred_id= \(did you mean thread_id=\?\)"
    ):
        agent.invoke("hi", thred_id="t")  # type: ignore[call-arg]
    with pytest.raises(UserError, match=r"show_tool_call= \(did you mean show_tool_calls=\?\)"):
        agent.stream("hi", thread_id="t", show_tool_call=True)  # type: ignore[call-arg]
    with pytest.raises(UserError, match=r"show_tool_calls="):
        agent.invoke("hi", thread_id="t", show_tool_calls=True)  # type: ignore[call-arg]  # a stream option
    assert agent.invoke("hi", thread_id="t") == "ok"


def test_session_without_a_session_store_says_how_to_get_one() -> None:
    agent = Agent(llm=FakeChatModel(["ok"]))
    with pytest.raises(UserError, match=r"sessions=sqlite_sessions\(path\)"):
        agent.session()
    with pytest.raises(UserError, match="durable sessions"):
        agent.recover()


def test_bad_construction_raises_clear_user_errors(tools: list[Any]) -> None:
    llm = FakeChatModel(["x"])
    with pytest.raises(UserError, match="Duplicate tool names"):
        Agent(llm=llm, tools=[*tools, tools[0]])
    with pytest.raises(UserError, match="checkpointer"):
        Agent(llm=llm, tools=tools, interrupt_on={"send_mail": True})
    with pytest.raises(UserError, match="pydantic model"):
        Agent(llm=llm, output=dict)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="decisions"):
        Agent(llm=llm, tools=tools, checkpointer=InMemorySaver(), interrupt_on={"send_mail": {"decisions": ["maybe"]}})
    with pytest.raises(UserError, match=r"does not have: \['send_mial'\]"):
        Agent(llm=llm, tools=tools, checkpointer=InMemorySaver(), interrupt_on={"send_mial": True})
    with pytest.raises(UserError, match="docstring"):
        Agent(llm=llm, tools=[lambda x: x])
    with pytest.raises(UserError, match="__"):
        Agent(llm=llm, mcp_server={"name": "a__b", "url": "http://127.0.0.1:9/mcp"})


def test_default_llm_needs_the_openrouter_key() -> None:
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        Agent()


def test_describe_is_metadata_and_not_sent_to_the_model() -> None:
    llm = FakeChatModel(["hi"])
    agent = Agent(llm=llm, prompt="P", describe="Answers billing questions")
    agent.invoke("x")
    assert agent.describe == "Answers billing questions"
    assert "billing" not in repr(llm.calls)


def test_input_may_be_langchain_messages_and_other_types_are_refused(tools: list[Any]) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage

    llm = FakeChatModel(["a", "b"])
    agent = Agent(llm=llm, tools=tools)
    assert agent.invoke(HumanMessage("hi")) == "a"
    assert agent.invoke([SystemMessage("Be short."), HumanMessage("hi")]) == "b"
    assert llm.calls[1][0].content == "Be short."
    with pytest.raises(UserError, match="must be a str"):
        agent.invoke(42)
    with pytest.raises(UserError, match="thread_id"):
        agent.invoke("hi", thread_id=7)  # type: ignore[arg-type]


def test_respond_answers_for_the_tool_and_true_allows_every_decision(tools: list[Any], ledger: Ledger) -> None:
    agent = Agent(
        llm=FakeChatModel([MAIL, "Verstanden."]),
        tools=tools,
        checkpointer=InMemorySaver(),
        interrupt_on={"send_mail": True, "get_weather": False},
    )
    paused = agent.invoke("Mail", thread_id="t")
    assert sorted(paused["decisions"]) == ["approve", "edit", "reject", "respond"]  # type: ignore[index]
    assert agent.invoke(thread_id="t", decision={"type": "respond", "message": "Schon erledigt."}) == "Verstanden."
    assert ledger.calls == []
    tool_results = [m for m in agent.llm.calls[1] if isinstance(m, ToolMessage)]  # type: ignore[attr-defined]
    assert tool_results[-1].content == "Schon erledigt."


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("yes", "must be True/False"),
        ({"decisions": ["approve"], "when": 1}, "unknown keys"),
        ({"decisions": []}, "at least one"),
        ({"question": 42}, "must be a str or a function"),
    ],
)
def test_bad_interrupt_on_entries_are_user_errors(tools: list[Any], config: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        Agent(llm=FakeChatModel(["x"]), tools=tools, checkpointer=InMemorySaver(), interrupt_on={"send_mail": config})
    with pytest.raises(UserError, match="mapping"):
        Agent(llm=FakeChatModel(["x"]), tools=tools, checkpointer=InMemorySaver(), interrupt_on=["send_mail"])  # type: ignore[arg-type]


def test_tools_must_be_a_list_of_tools() -> None:
    with pytest.raises(UserError, match="list of tools"):
        Agent(llm=FakeChatModel(["x"]), tools="get_weather")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="Cannot use 42"):
        Agent(llm=FakeChatModel(["x"]), tools=[42])  # type: ignore[list-item]


def test_actions_option_validates_directive_proposed_actions_for_the_actor() -> None:
    from ai_utils import ActionRegistry, define_action

    registry = ActionRegistry(
        [
            define_action(id="open_ticket", description="Open a support ticket.", risk="safe"),
            define_action(id="refund", description="Refund an order.", risk="confirm", availability="pro"),
            define_action(id="delete_account", description="Delete the account.", risk="restricted"),
        ]
    )
    reply = (
        "Ich kümmere mich darum.\n"
        '!> open_ticket {"topic": "billing"}\n'
        '!> refund {"order": "A1"}\n'
        "!> delete_account {}\n"
        "?> Soll ich den Status prüfen?"
    )
    agent = Agent(llm=FakeChatModel([reply, reply]), actions=registry)

    pro = agent.invoke("Geld zurück", actor={"user_id": "u1", "plan": "pro"})
    assert pro.message == "Ich kümmere mich darum."  # type: ignore[union-attr]
    statuses = {a.id: a.status for a in pro.actions}  # type: ignore[union-attr]
    assert statuses == {"open_ticket": "allowed", "refund": "requires_confirmation", "delete_account": "blocked"}
    assert pro.follow_ups == ["Soll ich den Status prüfen?"]  # type: ignore[union-attr]

    free = agent.invoke("Geld zurück", actor={"user_id": "u2", "plan": "free"})
    assert {a.id: a.status for a in free.actions}["refund"] == "blocked"  # type: ignore[union-attr]

    with pytest.raises(UserError, match="output"):
        Agent(llm=FakeChatModel(["x"]), actions=registry, output=BaseModel)


def test_pending_rebuilds_the_approval_card_after_a_page_reload(tools: list[Any]) -> None:
    agent = approval_agent(tools, [MAIL, "Gesendet."])
    paused = agent.invoke("Mail", thread_id="t")
    assert agent.pending("t") == paused
    agent.invoke(thread_id="t", decision="approve")
    assert agent.pending("t") is None
