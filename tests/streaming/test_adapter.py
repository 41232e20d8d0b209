from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import StructuredTool, ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Interrupt, interrupt
from typing_extensions import TypedDict

from ai_utils.client import is_interrupt, is_subagent_event, is_tool_event
from ai_utils.streaming._adapter import ChunkAdapter, aadapt, adapt, stream_kwargs
from ai_utils.streaming._interrupts import interrupt_chunk
from ai_utils.testing import FakeChatModel

CFG = {"configurable": {"thread_id": "t1"}}
WEATHER_RUN = [
    {
        "content": "Let me look.",
        "reasoning": "The user wants weather.",
        "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "w1"}],
    },
    "It is sunny in Paris.",
]


def run(graph: Any, inputs: Any = None, **show: bool) -> list[Any]:
    inputs = {"messages": [("user", "hi")]} if inputs is None else inputs
    return list(adapt(graph.stream(inputs, CFG, **stream_kwargs()), ChunkAdapter(**show)))


def test_by_default_the_stream_is_only_the_answer_text(make_graph: Callable[..., Any]) -> None:
    chunks = run(make_graph(WEATHER_RUN))

    assert all(isinstance(c, str) for c in chunks)
    assert "".join(chunks) == "Let me look.It is sunny in Paris."
    assert len(chunks) > 2  # token by token, not one final blob


def test_tool_calls_are_shown_as_start_and_end_events_between_the_texts(make_graph: Callable[..., Any]) -> None:
    chunks = run(make_graph(WEATHER_RUN), show_tool_calls=True)

    events = [c for c in chunks if is_tool_event(c)]
    assert events == [
        {"kind": "tool", "phase": "start", "tool_name": "get_weather", "id": "w1", "args": {"city": "Paris"}},
        {
            "kind": "tool",
            "phase": "end",
            "tool_name": "get_weather",
            "id": "w1",
            "output": "Sunny in Paris",
            "status": "success",
        },
    ]
    start, end = chunks.index(events[0]), chunks.index(events[1])
    assert "".join(c for c in chunks[:start] if isinstance(c, str)) == "Let me look."
    assert "".join(c for c in chunks[end:] if isinstance(c, str)) == "It is sunny in Paris."


def test_a_failing_tool_ends_with_status_error(make_graph: Callable[..., Any]) -> None:
    def _broken(x: int) -> str:
        raise ToolException("disk full")

    broken = StructuredTool.from_function(_broken, name="broken", description="Always fails.", handle_tool_error=True)

    graph = create_agent(
        FakeChatModel([{"tool_calls": [{"name": "broken", "args": {"x": 1}, "id": "b1"}]}, "Sorry."]),
        tools=[broken],
    )
    chunks = run(graph, show_tool_calls=True)

    end = [c for c in chunks if is_tool_event(c) and c["phase"] == "end"]
    assert end == [
        {
            "kind": "tool",
            "phase": "end",
            "tool_name": "broken",
            "id": "b1",
            "output": end[0]["output"],
            "status": "error",
        }
    ]
    assert "disk full" in end[0]["output"]


def test_reasoning_is_shown_only_when_asked_and_never_leaks_into_text(make_graph: Callable[..., Any]) -> None:
    plain = run(make_graph(WEATHER_RUN))
    with_reasoning = run(make_graph(WEATHER_RUN), show_reasoning=True)

    assert "wants" not in "".join(plain)
    reasoning = [c for c in with_reasoning if isinstance(c, dict)]
    assert {c["kind"] for c in reasoning} == {"reasoning"}
    assert "".join(c["text"] for c in reasoning) == "The user wants weather."
    assert with_reasoning.index(reasoning[-1]) < with_reasoning.index("Let ")
    assert [c for c in with_reasoning if isinstance(c, str)] == plain


def _boss_with_researcher(inner_replies: list[Any], boss_replies: list[Any], **inner_kwargs: Any) -> Any:
    inner = create_agent(FakeChatModel(inner_replies), name="researcher", **inner_kwargs)

    @tool
    def research(question: str) -> str:
        """Ask the researcher subagent."""
        result = inner.invoke({"messages": [("user", question)]})
        return str(result["messages"][-1].text)

    return create_agent(FakeChatModel(boss_replies), tools=[research], checkpointer=InMemorySaver(), name="boss")


def test_subagent_text_is_attributed_to_its_namespace_and_kept_out_of_the_answer() -> None:
    def boss() -> Any:
        return _boss_with_researcher(
            ["Paris is in France."],
            [{"tool_calls": [{"name": "research", "args": {"question": "where?"}, "id": "r1"}]}, "Done: France."],
        )

    hidden = run(boss())
    shown = run(boss(), show_subagents=True)

    assert "".join(hidden) == "Done: France."
    sub = [c for c in shown if is_subagent_event(c)]
    assert "".join(c["text"] for c in sub) == "Paris is in France."
    assert {c["name"] for c in sub} == {"researcher"}
    assert len({tuple(c["namespace"]) for c in sub}) == 1
    assert sub[0]["namespace"][0].startswith("tools:")
    assert "".join(c for c in shown if isinstance(c, str)) == "Done: France."


def test_a_gated_tool_call_ends_the_stream_with_one_interrupt_chunk(
    make_graph: Callable[..., Any], outbox: Any
) -> None:
    graph = make_graph(
        [{"content": "Sending.", "tool_calls": [{"name": "send_email", "args": {"to": "bob", "body": "hi"}}]}],
        interrupt_on={"send_email": {"allowed_decisions": ["approve", "reject"], "description": "Send the mail?"}},
    )
    chunks = run(graph, show_tool_calls=True)
    pending = graph.get_state(CFG).interrupts

    assert chunks[-1] == {
        "kind": "interrupt",
        "id": pending[0].id,
        "question": "Send the mail?",
        "decisions": ["approve", "reject"],
        "tool_name": "send_email",
        "args": {"to": "bob", "body": "hi"},
    }
    assert [c for c in chunks if is_interrupt(c)] == [chunks[-1]]
    assert [c["phase"] for c in chunks if is_tool_event(c)] == ["start"]  # announced, not run
    assert outbox.sent == []


def test_several_gated_calls_in_one_turn_become_one_batch_with_an_id_per_item(
    make_graph: Callable[..., Any],
) -> None:
    graph = make_graph(
        [
            {
                "tool_calls": [
                    {"name": "get_weather", "args": {"city": "Oslo"}},
                    {"name": "send_email", "args": {"to": "bob", "body": "hi"}},
                ]
            }
        ],
        interrupt_on={
            "get_weather": {"allowed_decisions": ["approve", "reject"], "description": "Look it up?"},
            "send_email": True,
        },
    )
    chunks = run(graph)
    iid = graph.get_state(CFG).interrupts[0].id

    assert chunks[-1]["kind"] == "interrupt"
    items = chunks[-1]["items"]
    assert [i["id"] for i in items] == [f"{iid}:0", f"{iid}:1"]
    assert [(i["tool_name"], i["question"], i["decisions"]) for i in items] == [
        ("get_weather", "Look it up?", ["approve", "reject"]),
        ("send_email", items[1]["question"], ["approve", "edit", "reject", "respond"]),
    ]
    assert "send_email" in items[1]["question"]
    assert items[0]["args"] == {"city": "Oslo"}


def test_a_subagent_interrupt_seen_twice_in_the_stream_is_emitted_once() -> None:
    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    graph = _boss_with_researcher(
        [{"tool_calls": [{"name": "delete_file", "args": {"path": "/a"}}]}],
        [{"tool_calls": [{"name": "research", "args": {"question": "clean up"}}]}],
        tools=[delete_file],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"delete_file": True})],
    )
    parts = list(graph.stream({"messages": [("user", "go")]}, CFG, **stream_kwargs()))
    raw = [p for p in parts if p["type"] == "updates" and "__interrupt__" in p["data"]]
    chunks = list(adapt(iter(parts), ChunkAdapter(show_subagents=True)))

    assert len(raw) == 2  # once under the subagent's namespace, once at the root
    interrupts = [c for c in chunks if is_interrupt(c)]
    assert len(interrupts) == 1
    assert interrupts[0]["tool_name"] == "delete_file"
    assert interrupts[0]["id"] == graph.get_state(CFG).interrupts[0].id


def test_per_call_interrupts_are_collected_into_one_batch_with_the_allowed_decisions(
    make_graph: Callable[..., Any],
) -> None:
    graph = make_graph(
        [
            {
                "tool_calls": [
                    {"name": "send_email", "args": {"to": "a", "body": "1"}, "id": "e1"},
                    {"name": "send_email", "args": {"to": "b", "body": "2"}, "id": "e2"},
                ]
            }
        ],
        interrupt_on={"send_email": {"allowed_decisions": ["approve", "reject"]}},
        mode="per_call",
    )
    chunks = run(graph)
    pending = sorted(graph.get_state(CFG).interrupts, key=lambda i: i.id)

    assert len(pending) == 2
    assert [c for c in chunks if is_interrupt(c)] == [chunks[-1]]
    items = chunks[-1]["items"]
    assert [i["id"] for i in items] == [p.id for p in pending]
    assert all(i["decisions"] == ["approve", "reject"] for i in items)
    assert sorted(i["args"]["to"] for i in items) == ["a", "b"]


class _State(TypedDict):
    answer: str


def _asking_graph(value: Any) -> Any:
    def ask(state: _State) -> dict[str, str]:
        return {"answer": str(interrupt(value))}

    builder = StateGraph(_State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    return builder.compile(checkpointer=InMemorySaver())


def test_a_plain_interrupt_with_a_text_becomes_a_question() -> None:
    graph = _asking_graph("Which city?")
    chunks = run(graph, {"answer": ""})

    assert chunks == [
        {
            "kind": "interrupt",
            "id": graph.get_state(CFG).interrupts[0].id,
            "question": "Which city?",
            "decisions": [],
            "tool_name": None,
            "args": None,
        }
    ]


def test_a_plain_interrupt_with_a_mapping_uses_its_question_and_decisions() -> None:
    graph = _asking_graph({"question": "Deploy?", "decisions": ["approve", "reject"]})
    (chunk,) = run(graph, {"answer": ""})

    assert (chunk["question"], chunk["decisions"], chunk["tool_name"]) == ("Deploy?", ["approve", "reject"], None)


def test_a_plain_interrupt_with_another_value_shows_its_text() -> None:
    (chunk,) = run(_asking_graph(42), {"answer": ""})

    assert chunk["question"] == "42"


def test_text_of_other_nodes_is_not_answer_text_unless_all_nodes_are_allowed() -> None:
    summarizer = FakeChatModel(["SUMMARY"], cycle=True)

    def summarize(state: _State) -> dict[str, str]:
        return {"answer": summarizer.invoke("sum up").text}

    builder = StateGraph(_State)
    builder.add_node("summarize", summarize)
    builder.add_edge(START, "summarize")
    graph = builder.compile()

    assert list(adapt(graph.stream({"answer": ""}, **stream_kwargs()), ChunkAdapter())) == []
    everything = list(adapt(graph.stream({"answer": ""}, **stream_kwargs()), ChunkAdapter(text_nodes=None)))
    assert "".join(everything) == "SUMMARY"


def test_modes_the_adapter_does_not_use_are_ignored(make_graph: Callable[..., Any]) -> None:
    graph = make_graph(["Hello there."])
    parts = graph.stream(
        {"messages": [("user", "hi")]}, CFG, stream_mode=["values", "messages", "updates"], subgraphs=True, version="v2"
    )

    assert "".join(adapt(parts, ChunkAdapter())) == "Hello there."


async def test_the_async_twin_gives_the_same_chunks(make_graph: Callable[..., Any]) -> None:
    expected = run(make_graph(WEATHER_RUN), show_tool_calls=True, show_reasoning=True)
    graph = make_graph(WEATHER_RUN)
    adapter = ChunkAdapter(show_tool_calls=True, show_reasoning=True)
    got = [c async for c in aadapt(graph.astream({"messages": [("user", "hi")]}, CFG, **stream_kwargs()), adapter)]

    assert got == expected


def test_stopping_early_closes_the_graph_stream() -> None:
    closed: list[bool] = []

    def parts() -> Iterator[dict[str, Any]]:
        try:
            for i in range(100):
                yield {"type": "messages", "ns": (), "data": (AIMessageChunk(f"t{i} "), {"langgraph_node": "model"})}
        finally:
            closed.append(True)

    stream = adapt(parts(), ChunkAdapter())
    assert next(stream) == "t0 "
    stream.close()

    assert closed == [True]


async def test_stopping_the_async_twin_early_closes_the_graph_stream(make_graph: Callable[..., Any]) -> None:
    graph = make_graph(["one two three four five six"])
    source = graph.astream({"messages": [("user", "hi")]}, CFG, **stream_kwargs())
    stream = aadapt(source, ChunkAdapter())
    first = await anext(stream)
    await stream.aclose()

    assert first == "one "
    assert source.ag_running is False and source.ag_frame is None  # finished: closed, not left suspended


def _update(node: str, value: Any, ns: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "updates", "ns": ns, "data": {node: value}}


def test_tool_starts_are_read_from_every_update_shape_and_announced_once() -> None:
    call = AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Rome"}, "id": "c1"}])
    other = AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": None}], id="m2")
    adapter = ChunkAdapter(show_tool_calls=True)

    chunks = [
        *adapter.feed(_update("model", [{"messages": [call]}, None])),  # several writes of one node
        *adapter.feed(_update("model", {"messages": call})),  # a single message, seen before
        *adapter.feed(_update("model", {"messages": [other]})),  # a provider without tool call ids
        *adapter.feed(_update("model", {"messages": [other]})),
        *adapter.feed(_update("model", {"messages": [call]}, ns=("tools:1",))),  # a subagent's call
    ]

    assert [(c["id"], c["args"]) for c in chunks] == [("c1", {"city": "Rome"}), ("m2:get_weather", {"city": "Oslo"})]


def test_subagent_text_without_an_agent_name_carries_only_the_namespace() -> None:
    part = {"type": "messages", "ns": ("tools:1", "model:2"), "data": (AIMessageChunk("hi"), {})}

    assert ChunkAdapter(show_subagents=True).feed(part) == [
        {"kind": "subagent", "text": "hi", "namespace": ["tools:1", "model:2"]}
    ]


def test_interrupt_chunks_read_the_allowed_decisions_of_any_per_call_schema() -> None:
    value = {"type": "tool_approval", "tool_call_id": "c1", "name": "rm", "args": {}, "description": "Delete?"}
    only_approve = Interrupt(value, "a", response_schema={"properties": {"type": {"const": "approve"}}})
    unknown = Interrupt(value, "b", response_schema=None)

    assert interrupt_chunk([only_approve])["decisions"] == ["approve"]  # type: ignore[index]
    assert interrupt_chunk([unknown])["decisions"] == ["approve", "edit", "reject", "respond"]  # type: ignore[index]
    assert interrupt_chunk([]) is None


async def test_the_async_twin_accepts_any_async_iterable() -> None:
    class Parts:
        def __aiter__(self) -> Any:
            return self._gen()

        async def _gen(self) -> Any:
            yield {"type": "messages", "ns": (), "data": (AIMessageChunk("hi"), {"langgraph_node": "model"})}

    assert [c async for c in aadapt(Parts(), ChunkAdapter())] == ["hi"]


def test_a_structured_answer_is_not_shown_as_a_tool_call_named_after_the_schema() -> None:
    from pydantic import BaseModel

    from ai_utils import Agent

    class Triage(BaseModel):
        needs_refund: bool

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return "found"

    replies = [
        {"tool_calls": [{"name": "lookup", "args": {"order_id": "A"}}]},
        {"tool_calls": [{"name": "Triage", "args": {"needs_refund": True}}]},
    ]
    agent = Agent(llm=FakeChatModel(replies), tools=[lookup], output=Triage)
    chunks = list(agent.stream("hi", show_tool_calls=True))
    # The real tool call is shown; the answer given through the schema tool is not a tool call.
    assert [(c["phase"], c["tool_name"]) for c in chunks if is_tool_event(c)] == [
        ("start", "lookup"),
        ("end", "lookup"),
    ]
    assert not any("Returning structured response" in str(c) for c in chunks)
