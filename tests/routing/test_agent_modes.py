"""Agent(modes=router) / DeepAgent(modes=router): per-turn tool sets, refusals, tool-round limits, mode chunk."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from ai_utils import Agent, DeepAgent, KeywordModeRouter, MemorySaver, ModeDecision, ModeDefinition, UserError
from ai_utils.client import is_interrupt, is_mode_event, is_tool_event
from ai_utils.testing import FakeChatModel, FunctionChatModel

RAN: list[str] = []


@tool
def greet_user(name: str) -> str:
    """Greet a user by name."""
    RAN.append("greet_user")
    return f"Hello, {name}!"


@tool
def log_concern(concern: str) -> str:
    """Log a health concern."""
    RAN.append("log_concern")
    return "logged"


@tool
def lookup_medication(name: str) -> str:
    """Look up a medication."""
    RAN.append("lookup_medication")
    return f"{name}: take with food"


TOOLS = [greet_user, log_concern, lookup_medication]


class Recorder:
    """A model that answers in text and records what each call offered."""

    def __init__(self) -> None:
        self.tools: list[list[str]] = []
        self.systems: list[str] = []

    def __call__(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        self.tools.append([t["function"]["name"] for t in tools])
        self.systems.append(next((m.text for m in messages if isinstance(m, SystemMessage)), ""))
        return "ok"


def test_each_turn_offers_only_its_modes_tools_and_the_mode_instruction(router: KeywordModeRouter) -> None:
    seen = Recorder()
    agent = Agent(
        llm=FunctionChatModel(seen),
        prompt="You are a health agent.",
        tools=TOOLS,
        modes=router,
        checkpointer=MemorySaver(),
    )
    graph = agent.graph

    agent.invoke("Can you assess my symptoms?", thread_id="t1")
    agent.invoke("Hello!", thread_id="t1")  # the next message of the same thread: back to general
    agent.invoke("I think about self-harm", thread_id="t1")

    assert seen.tools == [["log_concern", "lookup_medication"], ["greet_user", "log_concern"], []]
    assert seen.systems[0] == (
        "You are a health agent.\n\n"
        "MODE: assessment\n"
        "ALLOWED_TOOLS_NOW: log_concern, lookup_medication\n"
        "CRITICAL: You may call ONLY tools listed in ALLOWED_TOOLS_NOW. Do not attempt to call any other tool."
    )
    assert "MODE: general\nALLOWED_TOOLS_NOW: greet_user, log_concern" in seen.systems[1]
    assert seen.systems[2].endswith(
        "MODE: safety\nALLOWED_TOOLS_NOW: (none)\n"
        "CRITICAL: No tools are available in this mode. Respond with text only."
    )
    assert agent.graph is graph  # routing is middleware: the graph is never rebuilt per turn
    # The plain agent without modes still offers everything.
    plain = Recorder()
    Agent(llm=FunctionChatModel(plain), tools=TOOLS).invoke("Can you assess my symptoms?")
    assert plain.tools == [["greet_user", "log_concern", "lookup_medication"]]


def test_a_call_to_a_tool_outside_the_mode_is_refused_and_never_runs(router: KeywordModeRouter) -> None:
    RAN.clear()
    llm = FakeChatModel(
        [
            {"tool_calls": [{"name": "greet_user", "args": {"name": "Ann"}, "id": "c1"}]},
            {"tool_calls": [{"name": "lookup_medication", "args": {"name": "ibuprofen"}, "id": "c2"}]},
            "Take ibuprofen with food.",
        ]
    )
    agent = Agent(llm=llm, tools=TOOLS, modes=router)

    assert agent.invoke("Please diagnose my headache") == "Take ibuprofen with food."
    assert RAN == ["lookup_medication"]
    results = [m for m in llm.calls[2] if isinstance(m, ToolMessage)]
    assert results[0].status == "error"
    assert results[0].text == (
        "Tool `greet_user` was refused: it is not allowed in mode `assessment`. "
        "ALLOWED_TOOLS_NOW: log_concern, lookup_medication. Answer without it."
    )
    assert (results[1].status, results[1].text) == ("success", "ibuprofen: take with food")


def test_a_refused_call_streams_its_start_then_its_error_end_and_is_stored_answered(router: KeywordModeRouter) -> None:
    RAN.clear()
    calls = [
        {"name": "greet_user", "args": {"name": "Ann"}, "id": "c1"},
        {"name": "log_concern", "args": {"concern": "rash"}, "id": "c2"},
    ]
    saver = MemorySaver()
    agent = Agent(llm=FakeChatModel([{"tool_calls": calls}, "Logged."]), tools=TOOLS, modes=router, checkpointer=saver)

    chunks = [c for c in agent.stream("Please evaluate my rash", thread_id="r1", show_tool_calls=True)]
    tools = [(c["phase"], c["id"], c.get("status")) for c in chunks if is_tool_event(c)]
    assert tools == [("start", "c1", None), ("start", "c2", None), ("end", "c1", "error"), ("end", "c2", "success")]
    assert RAN == ["log_concern"]
    # The refusal is in the thread right after the call, so the next turn (and a reload) sees every call answered.
    stored = agent.get_state("r1").values["messages"]
    answers = [m for m in stored if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.status) for m in answers] == [("c1", "error"), ("c2", "success")]
    assert (
        Agent(llm=FakeChatModel(["Hi again."]), tools=TOOLS, modes=router, checkpointer=saver).invoke(
            "hello", thread_id="r1"
        )
        == "Hi again."
    )


def test_structured_output_still_works_in_a_mode_without_tools() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        text: str

    router = KeywordModeRouter(default_mode=ModeDefinition(mode="quiet", allowed_tools=[]))
    llm = FakeChatModel([{"tool_calls": [{"name": "Answer", "args": {"text": "fine"}, "id": "s1"}]}])
    agent = Agent(llm=llm, tools=TOOLS, modes=router, output=Answer, checkpointer=MemorySaver())
    assert agent.invoke("how are you?", thread_id="s") == Answer(text="fine")
    # The structured-output call is create_agent's, answered once by it and never refused.
    answers = [m for m in agent.get_state("s").values["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.status) for m in answers] == [("s1", "success")]


def _limited(max_tool_iterations: int) -> KeywordModeRouter:
    return KeywordModeRouter(
        default_mode=ModeDefinition(mode="general", allowed_tools=[]),
        rules=[
            {
                "keywords": ["medication"],
                "mode": "meds",
                "definition": {"allowed_tools": ["lookup_medication"], "max_tool_iterations": max_tool_iterations},
            }
        ],
    )


def test_tool_rounds_are_capped_by_max_tool_iterations_then_the_model_must_answer() -> None:
    RAN.clear()
    offered: list[int] = []

    def eager(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        offered.append(len(tools))
        if tools:  # a model that always wants one more lookup while it may
            return {"tool_calls": [{"name": "lookup_medication", "args": {"name": f"m{len(offered)}"}}]}
        return "Here is what I found."

    agent = Agent(llm=FunctionChatModel(eager), tools=TOOLS, modes=_limited(2))
    assert agent.invoke("medication questions") == "Here is what I found."
    assert RAN == ["lookup_medication", "lookup_medication"]
    assert offered == [1, 1, 0]


def test_a_model_that_calls_tools_past_the_limit_is_refused() -> None:
    RAN.clear()
    call = {"tool_calls": [{"name": "lookup_medication", "args": {"name": "x"}}]}
    llm = FakeChatModel([call, call, "done"])  # ignores that it was offered no tools on the second call
    agent = Agent(llm=llm, tools=TOOLS, modes=_limited(1))
    assert agent.invoke("medication") == "done"
    assert RAN == ["lookup_medication"]
    refused = [m for m in llm.calls[2] if isinstance(m, ToolMessage)][-1]
    assert refused.status == "error"
    assert "used its 1 tool rounds in mode `meds`" in refused.text


def test_stream_starts_with_the_mode_chunk_when_tool_calls_are_shown(router: KeywordModeRouter) -> None:
    llm = FakeChatModel(
        [{"tool_calls": [{"name": "log_concern", "args": {"concern": "rash"}, "id": "c1"}]}, "Logged it."] * 2
    )
    agent = Agent(llm=llm, tools=TOOLS, modes=router)

    chunks = list(agent.stream("Please evaluate my rash", show_tool_calls=True))
    assert chunks[0] == {"kind": "mode", "mode": "assessment", "tools": ["log_concern", "lookup_medication"]}
    assert is_mode_event(chunks[0]) and not is_tool_event(chunks[0])
    assert [c for c in chunks if is_mode_event(c)] == [chunks[0]]  # once per turn, not per model call
    assert [c["phase"] for c in chunks if is_tool_event(c)] == ["start", "end"]
    assert "".join(c for c in chunks if isinstance(c, str)) == "Logged it."
    # Without show_tool_calls the stream is text only.
    plain = list(agent.stream("Please evaluate my rash"))
    assert all(isinstance(c, str) for c in plain) and "".join(plain) == "Logged it."


async def test_astream_emits_the_same_mode_chunk_and_ndjson_carries_it(router: KeywordModeRouter) -> None:
    from ai_utils.streaming import andjson_lines

    agent = Agent(llm=FakeChatModel(["Hi!"]), tools=TOOLS, modes=router)
    lines = [line async for line in andjson_lines(agent.astream("hello", show_tool_calls=True))]
    assert json.loads(lines[0]) == {"kind": "mode", "mode": "general", "tools": ["greet_user", "log_concern"]}
    assert json.loads(lines[-1]) == "Hi!"


def test_a_paused_turn_keeps_its_mode_when_approved(router: KeywordModeRouter) -> None:
    RAN.clear()
    seen = Recorder()

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        seen(messages, tools)
        if not any(isinstance(m, ToolMessage) for m in messages):
            return {"tool_calls": [{"name": "log_concern", "args": {"concern": "dizzy"}}]}
        return "Noted."

    agent = Agent(
        llm=FunctionChatModel(reply),
        tools=TOOLS,
        modes=router,
        checkpointer=MemorySaver(),
        interrupt_on={"log_concern": {"decisions": ["approve", "reject"], "question": "Log it?"}},
    )
    first = list(agent.stream("Can you assess why I am dizzy?", thread_id="p1", show_tool_calls=True))
    assert first[0]["kind"] == "mode" and is_interrupt(first[-1])
    resumed = list(agent.stream(thread_id="p1", decision="approve", show_tool_calls=True))
    assert not any(is_mode_event(c) for c in resumed)  # the same turn: announced once
    assert RAN == ["log_concern"] and resumed[-1] == "Noted."
    assert seen.tools == [["log_concern", "lookup_medication"]] * 2


def test_deep_agent_offers_only_the_modes_tools_built_ins_included() -> None:
    seen = Recorder()
    router = KeywordModeRouter(
        default_mode=ModeDefinition(mode="general", allowed_tools=["read_file", "greet_user"]),
        rules=[{"keywords": ["medication"], "mode": "meds", "definition": {"allowed_tools": ["lookup_medication"]}}],
    )
    agent = DeepAgent(llm=FunctionChatModel(seen), tools=TOOLS, modes=router)

    chunks = list(agent.stream("Which medication helps?", thread_id="d1", show_tool_calls=True))
    agent.invoke("hello", thread_id="d1")

    assert chunks[0] == {"kind": "mode", "mode": "meds", "tools": ["lookup_medication"]}
    assert seen.tools == [["lookup_medication"], ["read_file", "greet_user"]]
    assert "MODE: meds\nALLOWED_TOOLS_NOW: lookup_medication" in seen.systems[0]
    assert "write_todos" in agent.current_tools  # the graph still has every tool; the model call is narrowed


def test_deep_agent_refuses_a_built_in_tool_outside_the_mode() -> None:
    llm = FakeChatModel(
        [{"tool_calls": [{"name": "write_file", "args": {"file_path": "/a.txt", "content": "x"}}]}, "ok"]
    )
    router = KeywordModeRouter(default_mode=ModeDefinition(mode="general", allowed_tools=["read_file"]))
    agent = DeepAgent(llm=llm, modes=router)
    agent.invoke("write a file", thread_id="d2")
    assert agent.graph.get_state({"configurable": {"thread_id": "d2"}}).values.get("files", {}) == {}
    refusal = [m for m in llm.calls[1] if isinstance(m, ToolMessage)][0]
    assert refusal.status == "error" and "not allowed in mode `general`" in refusal.text


class ByLength:
    """A custom router: long messages get the lookup tool, short ones none."""

    def resolve(self, message: Any, history: Any = ()) -> ModeDecision:
        long = len(str(message)) > 20
        return ModeDecision(
            mode="deep" if long else "chat",
            allowed_tools=["lookup_medication"] if long else [],
            active_skills=[],
            max_tool_iterations=3,
            retrieval_budget=0,
        )


def test_any_object_with_resolve_is_a_mode_router() -> None:
    seen = Recorder()
    agent = Agent(llm=FunctionChatModel(seen), tools=TOOLS, modes=ByLength())
    agent.invoke("hi")
    agent.invoke("a much longer question about my medication")
    assert seen.tools == [[], ["lookup_medication"]]


@pytest.mark.parametrize("tools", [["lookup_medication"], ("lookup_medication",)])
def test_the_turn_stores_its_decision_field_by_field_with_the_routed_message(tools: Any) -> None:
    decision = ModeDecision("deep", tools, [], 3, 0, matched_rule=1)  # a tuple too, as a custom router might

    class Fixed:
        def resolve(self, message: Any, history: Any = ()) -> ModeDecision:
            return decision

    agent = Agent(llm=FakeChatModel(["ok"]), tools=TOOLS, modes=Fixed(), checkpointer=MemorySaver())
    agent.invoke("hi", thread_id="s")
    values = agent.graph.get_state({"configurable": {"thread_id": "s"}}).values
    stored = dict(values["ai_utils_mode"])
    assert stored.pop("anchor") == values["messages"][0].id
    assert stored == json.loads(json.dumps(dataclasses.asdict(decision)))  # the checkpoint keeps a tuple as a list
    assert decision.allowed_tools == tools  # the router's own decision is left as it was


def test_a_modes_value_without_resolve_is_a_user_error() -> None:
    with pytest.raises(UserError, match="mode router"):
        Agent(llm=FakeChatModel(["x"]), modes={"general": ["a"]})  # type: ignore[arg-type]


def _in_order(messages: list[BaseMessage]) -> bool:
    """Every tool call is answered, and its answers come right after its AI message (what providers require)."""
    from langchain_core.messages import AIMessage

    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            answers = messages[i + 1 : i + 1 + len(message.tool_calls)]
            if sorted(m.tool_call_id for m in answers if isinstance(m, ToolMessage)) != sorted(
                c["id"] for c in message.tool_calls
            ):
                return False
    return True


def test_a_superseded_approval_and_a_refusal_in_one_model_call_both_land_in_order(router: KeywordModeRouter) -> None:
    RAN.clear()
    llm = FakeChatModel(
        [
            {"tool_calls": [{"name": "log_concern", "args": {"concern": "rash"}, "id": "a1"}]},
            # The next turn's first model call sees the repaired thread and calls a tool outside the mode.
            {"tool_calls": [{"name": "greet_user", "args": {"name": "Ann"}, "id": "g1"}]},
            "Hello.",
            "Still here.",
        ]
    )
    agent = Agent(llm=llm, tools=TOOLS, modes=router, checkpointer=MemorySaver(), interrupt_on={"log_concern": True})
    assert is_interrupt(agent.invoke("Please evaluate my rash", thread_id="o1"))

    chunks = list(agent.stream("Please diagnose it instead", thread_id="o1", show_tool_calls=True))
    ends = {c["id"]: c["status"] for c in chunks if is_tool_event(c) and c["phase"] == "end"}
    assert ends == {"a1": "error", "g1": "error"} and RAN == []
    stored = agent.get_state("o1").values["messages"]
    assert _in_order(stored)
    assert [type(m).__name__ for m in stored] == [
        "HumanMessage", "AIMessage", "ToolMessage",  # the approval, answered as superseded
        "HumanMessage", "AIMessage", "ToolMessage",  # the refused call, answered by the mode router
        "AIMessage",
    ]  # fmt: skip
    assert all(_in_order(call) for call in llm.calls)
    assert agent.invoke("Still there?", thread_id="o1") == "Still here."


def test_modes_work_the_same_in_a_durable_session(router: KeywordModeRouter) -> None:
    from ai_utils import durable_tool, memory_sessions

    RAN.clear()
    seen = Recorder()

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        seen(messages, tools)
        if not any(isinstance(m, ToolMessage) for m in messages):
            return {"tool_calls": [{"name": "greet_user", "args": {"name": "Ann"}, "id": "g1"}]}
        return "Noted."

    store = memory_sessions()
    tools = [durable_tool(t, idempotent=True) for t in TOOLS]
    agent = Agent(llm=FunctionChatModel(reply), tools=tools, modes=router, sessions=store, name="health")
    result = agent.session().prompt("Please diagnose my headache", message_id="m1").result()
    assert (result.stop_reason, result.output) == ("end_turn", "Noted.")
    assert RAN == [] and seen.tools[0] == ["log_concern", "lookup_medication"]
    assert "MODE: assessment" in seen.systems[0]
    store.close()


def test_the_narrowed_request_is_what_override_would_build(router: KeywordModeRouter) -> None:
    """The mode step copies a plain `ModelRequest` instead of `override`-ing it: the two must agree field by field."""
    from langchain.agents.middleware import ModelRequest
    from langgraph.runtime import Runtime

    from ai_utils.routing._middleware import MODE_KEY, ModeMiddleware

    step = ModeMiddleware(router)
    decided = step.start({"messages": [HumanMessage("hello there")]})
    written: list[Any] = []
    for tool_choice in (None, "auto", "any"):
        request = ModelRequest(
            model=FakeChatModel(["ok"]),
            messages=decided["messages"],
            system_message=SystemMessage("Be kind."),
            tool_choice=tool_choice,
            tools=list(TOOLS),
            state={"messages": decided["messages"], MODE_KEY: decided[MODE_KEY]},
            runtime=Runtime(stream_writer=written.append),
            model_settings={"temperature": 0},
        )
        narrowed, view = step.before(request)
        expected = request.override(tools=list(view.tools), system_message=view.system)
        if not view.tools:
            expected = expected.override(tool_choice=None)
        assert type(narrowed) is ModelRequest
        assert vars(narrowed) == vars(expected)
        assert narrowed.tools is not request.tools and request.tools == TOOLS  # the original is left as it was
        assert 0 < len(narrowed.tools) < len(TOOLS)
    assert len(written) == 3  # the mode chunk, once per turn's first call
