"""GenAI semantic-convention spans (``ai_utils.otel``) through OpenTelemetry's own SDK and in-memory exporter."""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.types import interrupt
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

from ai_utils import Agent, Chain, DeepAgent, durable_tool
from ai_utils.client import is_interrupt
from ai_utils.gateway import Gateway, Route
from ai_utils.otel import OpenTelemetryCallbackHandler, instrument, uninstrument
from ai_utils.testing import FakeChatModel, FunctionChatModel

SENTINEL = "sk-CONTEXT-SENTINEL-8c2d"


class Secrets(BaseModel):
    api_token: str


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def whoami(query: str, runtime: ToolRuntime) -> str:
    """Who is asking (reads the run's context)."""
    return f"a caller with a token of length {len(runtime.context.api_token)}"


@tool
def explode(query: str) -> str:
    """Always fails, quoting a secret in its message."""
    raise ValueError(f"cannot use {SENTINEL}")


@tool
def refuse(query: str) -> str:
    """Fails the way tools report a failure to the model."""
    raise ToolException("the service said no")


refuse.handle_tool_error = True


@tool
def ask_human(question: str) -> str:
    """Ask the human (pauses the run)."""
    return str(interrupt({"question": question}))


class Spans:
    """A TracerProvider with an in-memory exporter, and helpers over the finished spans."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        [span] = self.named(name)
        return span

    def text(self) -> str:
        """Everything the spans carry, as text (names, attributes, events, statuses)."""
        return json.dumps(
            [
                {
                    "name": s.name,
                    "attributes": dict(s.attributes or {}),
                    "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in s.events],
                    "status": [str(s.status.status_code), s.status.description],
                }
                for s in self.all()
            ],
            default=str,
        )


@pytest.fixture
def spans() -> Iterator[Spans]:
    recorder = Spans()
    yield recorder
    uninstrument()
    recorder.provider.shutdown()


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def calculator(**kwargs: Any) -> Agent[str]:
    model = FakeChatModel([{"tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]}, "The sum is 5."])
    return Agent(llm=model, tools=[add], checkpointer=InMemorySaver(), name="calc", **kwargs)


def test_an_agent_run_is_one_span_tree_with_genai_attributes(spans: Spans) -> None:
    agent = calculator(tracer_provider=spans.provider)

    assert agent.invoke("What is 2 + 3?", thread_id="thread-7") == "The sum is 5."

    root = spans.one("invoke_agent calc")
    chats = spans.named("chat fake-chat-model")
    tool_span = spans.one("execute_tool add")
    assert root.kind == SpanKind.INTERNAL and root.parent is None
    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "gen_ai.conversation.id": "thread-7",
    }
    assert len(chats) == 2 and all(c.kind == SpanKind.CLIENT for c in chats)
    first = dict(chats[0].attributes or {})
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "fake"
    assert (first["gen_ai.request.model"], first["gen_ai.response.model"]) == ("fake-chat-model", "fake-chat-model")
    assert first["gen_ai.conversation.id"] == "thread-7"
    assert first["gen_ai.usage.input_tokens"] >= 1 and first["gen_ai.usage.output_tokens"] >= 1
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert tool_span.kind == SpanKind.INTERNAL
    assert {k: v for k, v in (tool_span.attributes or {}).items() if k != "gen_ai.tool.call.id"} == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two integers.",
        "gen_ai.conversation.id": "thread-7",
    }
    assert tool_span.attributes and str(tool_span.attributes["gen_ai.tool.call.id"]).startswith("call_")
    # chat and execute_tool hang under invoke_agent, in one trace; every span ended OK.
    for child in [*chats, tool_span]:
        assert parent_of(child) == root.context.span_id
        assert child.context.trace_id == root.context.trace_id
    assert all(s.status.status_code == StatusCode.UNSET for s in spans.all())
    assert chats[0].start_time <= tool_span.start_time <= chats[1].start_time  # in run order
    assert root.start_time <= chats[0].start_time and chats[1].end_time <= root.end_time


async def test_an_astream_run_builds_the_same_tree(spans: Spans) -> None:
    agent = calculator(tracer_provider=spans.provider)

    chunks = [c async for c in agent.astream("What is 2 + 3?", thread_id="t", show_tool_calls=True)]

    assert "".join(c for c in chunks if isinstance(c, str)) == "The sum is 5."
    root = spans.one("invoke_agent calc")
    assert {parent_of(s) for s in spans.all() if s is not root} == {root.context.span_id}
    assert sorted(s.name for s in spans.all()) == [
        "chat fake-chat-model",
        "chat fake-chat-model",
        "execute_tool add",
        "invoke_agent calc",
    ]


def test_the_ambient_span_is_the_agent_runs_parent(spans: Spans) -> None:
    agent = calculator(tracer_provider=spans.provider)
    tracer = spans.provider.get_tracer("app")

    with tracer.start_as_current_span("POST /chat") as request:
        agent.invoke("What is 2 + 3?", thread_id="t")

    root = spans.one("invoke_agent calc")
    assert parent_of(root) == request.get_span_context().span_id
    assert root.context.trace_id == request.get_span_context().trace_id


@pytest.mark.parametrize("failing", ["raises", "to_model", "reports"])
def test_a_failing_tool_ends_its_span_with_error_status(spans: Spans, failing: str) -> None:
    name = "refuse" if failing == "reports" else "explode"
    model = FakeChatModel([{"tool_calls": [{"name": name, "args": {"query": "q"}}]}, "Sorry."])
    tool_errors = "raise" if failing == "raises" else "model"
    agent = Agent(llm=model, tools=[explode, refuse], tracer_provider=spans.provider, tool_errors=tool_errors)

    if failing == "raises":  # tool_errors="raise": the exception reaches the run
        with pytest.raises(ValueError, match="cannot use"):
            agent.invoke("go")
    else:  # the failure goes to the model as a ToolMessage (an exception by default, a ToolException as such)
        assert agent.invoke("go") == "Sorry."

    tool_span = spans.one(f"execute_tool {name}")
    assert tool_span.status.status_code == StatusCode.ERROR
    expected = "tool_error" if failing == "reports" else "ValueError"
    assert (tool_span.attributes or {})["error.type"] == expected
    assert tool_span.status.description == expected  # the type, never the message
    root = spans.one("invoke_agent Agent")
    assert parent_of(tool_span) == root.context.span_id
    assert root.status.status_code == (StatusCode.ERROR if failing == "raises" else StatusCode.UNSET)
    assert SENTINEL not in spans.text()


def test_an_approval_interrupt_is_not_an_error_and_its_resume_runs_the_tool(spans: Spans) -> None:
    agent = calculator(tracer_provider=spans.provider, interrupt_on={"add": True})

    paused = agent.invoke("What is 2 + 3?", thread_id="t")
    assert is_interrupt(paused)
    assert all(s.status.status_code == StatusCode.UNSET for s in spans.all())
    root = spans.one("invoke_agent calc")
    [event] = [e for e in root.events if e.name == "interrupt"]
    assert event.attributes is not None and event.attributes["interrupt.count"] == 1
    assert list(event.attributes["interrupt.ids"]) == [paused["id"].split(":")[0]]  # type: ignore[index]
    assert not spans.named("execute_tool add")

    assert agent.invoke(thread_id="t", decision="approve") == "The sum is 5."
    assert len(spans.named("invoke_agent calc")) == 2
    assert spans.one("execute_tool add").status.status_code == StatusCode.UNSET


def test_an_interrupt_raised_inside_a_tool_ends_the_tool_span_without_error(spans: Spans) -> None:
    model = FakeChatModel([{"tool_calls": [{"name": "ask_human", "args": {"question": "Sure?"}}]}, "Done."])
    agent = Agent(llm=model, tools=[ask_human], checkpointer=InMemorySaver(), tracer_provider=spans.provider)

    assert is_interrupt(agent.invoke("go", thread_id="t"))

    tool_span = spans.one("execute_tool ask_human")
    assert tool_span.status.status_code == StatusCode.UNSET
    assert [e.name for e in tool_span.events] == ["interrupt"]
    assert "Sure?" not in spans.text()  # interrupt payloads stay out: ids only


def test_content_is_recorded_only_with_capture_content(spans: Spans) -> None:
    instrument(spans.provider)
    calculator().invoke("What is 2 + 3?", thread_id="t")
    assert "What is 2 + 3?" not in spans.text()
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.a", "gen_ai.tool.call.r"))
                   for s in spans.all() for k in (s.attributes or {}))  # fmt: skip
    spans.exporter.clear()

    instrument(spans.provider, capture_content=True)
    calculator().invoke("What is 2 + 3?", thread_id="t")
    first_chat = spans.named("chat fake-chat-model")[0].attributes or {}
    sent = json.loads(str(first_chat["gen_ai.input.messages"]))
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": "What is 2 + 3?"}]}]
    answer = json.loads(str(spans.named("chat fake-chat-model")[1].attributes["gen_ai.output.messages"]))  # type: ignore[index]
    assert answer == [{"role": "assistant", "parts": [{"type": "text", "content": "The sum is 5."}]}]
    tool_attributes = spans.one("execute_tool add").attributes or {}
    assert json.loads(str(tool_attributes["gen_ai.tool.call.arguments"])) == {"a": 2, "b": 3}
    assert tool_attributes["gen_ai.tool.call.result"] == "5"


PASTED_KEY = "sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"


@tool
def remember(note: str) -> str:
    """Store a note (and echo it back)."""
    return f"stored: {note}"


def test_captured_content_carries_secrets_only_redacted(spans: Spans) -> None:
    instrument(spans.provider, capture_content=True)
    model = FakeChatModel([{"tool_calls": [{"name": "remember", "args": {"note": PASTED_KEY}}]}, "Noted."])
    agent = Agent(llm=model, tools=[remember], checkpointer=InMemorySaver())

    assert agent.invoke(f"Remember my key {PASTED_KEY} please", thread_id="t") == "Noted."

    assert PASTED_KEY not in spans.text()
    sent = json.loads(str(spans.named("chat fake-chat-model")[0].attributes["gen_ai.input.messages"]))  # type: ignore[index]
    assert sent[0]["parts"][0]["content"] == "Remember my key [REDACTED:openai_api_key] please"
    tool_attributes = spans.one("execute_tool remember").attributes or {}
    assert json.loads(str(tool_attributes["gen_ai.tool.call.arguments"])) == {"note": "[REDACTED:openai_api_key]"}
    assert tool_attributes["gen_ai.tool.call.result"] == "stored: [REDACTED:openai_api_key]"
    # The run itself is untouched: the tool got the real value (redaction is for the trace only).
    state = agent.graph.get_state({"configurable": {"thread_id": "t"}})
    assert any(PASTED_KEY in str(m.content) for m in state.values["messages"])


@pytest.mark.parametrize("capture_content", [False, True])
def test_the_context_never_reaches_a_span(spans: Spans, capture_content: bool) -> None:
    instrument(spans.provider, capture_content=capture_content)
    model = FakeChatModel(
        [
            {"tool_calls": [{"name": "whoami", "args": {"query": "me"}}, {"name": "explode", "args": {"query": "x"}}]},
            "Done.",
        ]
    )
    agent = Agent(llm=model, tools=[whoami, explode], context_schema=Secrets, checkpointer=InMemorySaver())

    # explode's error (quoting the secret) goes to the model, as tool errors do by default.
    assert agent.invoke("Who am I?", thread_id="t", context=Secrets(api_token=SENTINEL)) == "Done."

    assert spans.named("execute_tool whoami") and spans.named("execute_tool explode")
    assert SENTINEL not in spans.text()
    assert ("a caller with a token" in spans.text()) is capture_content  # the tool ran and read the context


def test_instrument_traces_every_run_until_uninstrument(spans: Spans) -> None:
    instrument(spans.provider)
    calculator().invoke("What is 2 + 3?", thread_id="t")
    Chain(llm=FakeChatModel(["A summary."]), prompt="Summarise.").invoke({"text": "long"})
    assert sorted(s.name for s in spans.all()) == [
        "chat fake-chat-model",
        "chat fake-chat-model",
        "chat fake-chat-model",
        "execute_tool add",
        "invoke_agent calc",
    ]

    uninstrument()
    spans.exporter.clear()
    calculator().invoke("What is 2 + 3?", thread_id="t")
    assert spans.all() == []


def test_instrument_again_switches_provider_and_content_and_comes_back_after_uninstrument(spans: Spans) -> None:
    other = Spans()
    instrument(spans.provider)
    instrument(other.provider)  # replaces the first: spans go to the new provider only
    calculator().invoke("What is 2 + 3?", thread_id="t")
    assert spans.all() == [] and other.named("invoke_agent calc")

    instrument(spans.provider)  # back to the first provider, without content
    calculator().invoke("What is 2 + 3?", thread_id="t")
    assert spans.named("invoke_agent calc") and len(other.named("invoke_agent calc")) == 1
    assert "What is 2 + 3?" not in spans.text()

    spans.exporter.clear()
    instrument(spans.provider, capture_content=True)  # same provider, other settings: content now
    calculator().invoke("What is 2 + 3?", thread_id="t")
    assert "What is 2 + 3?" in spans.text()

    spans.exporter.clear()
    uninstrument()
    instrument(spans.provider, capture_content=True)  # the same settings again after uninstrument still trace
    calculator().invoke("What is 2 + 3?", thread_id="t")
    assert "What is 2 + 3?" in spans.text()
    instrument(spans.provider)
    spans.exporter.clear()
    calculator().invoke("What is 2 + 3?", thread_id="t")
    assert spans.named("invoke_agent calc") and "What is 2 + 3?" not in spans.text()
    other.provider.shutdown()


def test_a_gateway_call_carries_its_request_id(spans: Spans) -> None:
    instrument(spans.provider)
    gateway = Gateway(routes=[Route("support", "fake", "fake-1", {"responses": ["Hello."]})])

    response = gateway.complete("support", "Hi", actor={"user_id": "u1"})

    chat = spans.one("chat fake-1")
    assert (chat.attributes or {})["ai_utils.gateway.request_id"] == response.request_id
    assert (chat.attributes or {})["gen_ai.provider.name"] == "fake"


def test_deep_agent_and_chain_take_a_tracer_provider(spans: Spans) -> None:
    deep = DeepAgent(llm=FakeChatModel(["Planned."]), checkpointer=False, tracer_provider=spans.provider)
    chain = Chain(llm=FakeChatModel(["Short."]), prompt="Be brief.", tracer_provider=spans.provider)

    assert deep.invoke("Plan it.") == "Planned."
    assert chain.invoke({"text": "x"}) == "Short."

    root = spans.one("invoke_agent DeepAgent")
    chats = spans.named("chat fake-chat-model")
    assert len(chats) == 2
    assert parent_of(chats[0]) == root.context.span_id and chats[1].parent is None


def test_a_subagent_run_is_an_invoke_agent_span_under_its_task_tool(spans: Spans) -> None:
    task = {"name": "task", "args": {"description": "Find facts.", "subagent_type": "researcher"}}
    model = FakeChatModel([{"tool_calls": [task]}, "Facts found.", "Final."])
    subagent = {"name": "researcher", "description": "Finds facts.", "system_prompt": "Be brief."}
    deep = DeepAgent(llm=model, checkpointer=False, name="lead", subagents=[subagent], tracer_provider=spans.provider)

    assert deep.invoke("Plan it.") == "Final."

    lead, researcher = spans.one("invoke_agent lead"), spans.one("invoke_agent researcher")
    task_span = spans.one("execute_tool task")
    assert parent_of(task_span) == lead.context.span_id
    assert parent_of(researcher) == task_span.context.span_id
    assert [parent_of(c) for c in spans.named("chat fake-chat-model")].count(researcher.context.span_id) == 1


def test_a_session_turn_names_its_session_as_the_conversation(spans: Spans) -> None:
    from ai_utils.sessions import memory_sessions

    agent = Agent(llm=FakeChatModel(["Hello."]), sessions=memory_sessions(), tracer_provider=spans.provider)
    session = agent.session()

    assert session.prompt("Hi").result(timeout=60).output == "Hello."

    root = spans.one("invoke_agent Agent")
    assert (root.attributes or {})["gen_ai.conversation.id"] == session.id
    assert (spans.one("chat fake-chat-model").attributes or {})["gen_ai.conversation.id"] == session.id


def test_no_context_is_ever_attached_so_nothing_fails_to_detach(spans: Spans, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    agent = calculator(tracer_provider=spans.provider)
    before = trace.get_current_span()

    agent.invoke("What is 2 + 3?", thread_id="t")

    assert trace.get_current_span() is before
    assert "Failed to detach context" not in caplog.text
    assert "OpenTelemetry callback" not in caplog.text  # no callback failed


def test_the_run_map_is_bounded_and_ends_what_it_drops(spans: Spans, monkeypatch: pytest.MonkeyPatch) -> None:
    from uuid import uuid4

    import ai_utils.otel._handler as handler_module

    monkeypatch.setattr(handler_module, "MAX_RUNS", 3)
    handler = OpenTelemetryCallbackHandler(spans.provider)
    for _ in range(5):  # tool runs that never end (their process died mid-call, say)
        handler.on_tool_start({"name": "stuck"}, "", run_id=uuid4())

    assert len(spans.named("execute_tool stuck")) == 2  # the two oldest were ended when dropped


# --- our runs trace themselves from the run path (ai_utils._run.tracing), not from LangChain callbacks ---------


class HandlersSeen(AgentMiddleware):  # type: ignore[type-arg]
    """A user middleware noting the callback handlers LangChain gives each model call of the run."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def _note(self) -> None:
        manager = get_config().get("callbacks")
        self.seen.extend(type(h).__name__ for h in getattr(manager, "handlers", None) or ())

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        self._note()
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        self._note()
        return await handler(request)


@pytest.mark.parametrize("how", ["instrument", "tracer_provider"])
async def test_an_agent_run_has_no_callback_handler_and_no_duplicate_chat_span(spans: Spans, how: str) -> None:
    if how == "instrument":
        instrument(spans.provider)
    seen = HandlersSeen()
    model = FakeChatModel([{"tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]}, "The sum is 5."])
    options: dict[str, Any] = {"tracer_provider": spans.provider} if how == "tracer_provider" else {}
    agent = Agent(llm=model, tools=[add], checkpointer=InMemorySaver(), middleware=[seen], **options)

    assert await agent.ainvoke("What is 2 + 3?", thread_id="t") == "The sum is 5."

    assert seen.seen == []  # LangChain's callback machinery stays off: the run traces itself
    assert sorted(s.name for s in spans.all()) == [
        "chat fake-chat-model",
        "chat fake-chat-model",
        "execute_tool add",
        "invoke_agent Agent",
    ]
    root = spans.one("invoke_agent Agent")
    assert {parent_of(s) for s in spans.all() if s is not root} == {root.context.span_id}


def test_a_plain_langchain_chain_under_instrument_is_still_traced(spans: Spans) -> None:
    instrument(spans.provider)
    chain = ChatPromptTemplate.from_messages([("human", "{text}")]) | FakeChatModel(["A summary."])

    assert chain.invoke({"text": "long"}).content == "A summary."

    chat = spans.one("chat fake-chat-model")
    assert chat.parent is None and (chat.attributes or {})["gen_ai.provider.name"] == "fake"


@tool
def summarise(text: str) -> str:
    """Summarise a text with a plain LangChain chain."""
    chain = ChatPromptTemplate.from_messages([("human", "{text}")]) | FakeChatModel(["Short."])
    return str(chain.invoke({"text": text}).content)


async def test_what_a_tool_runs_hangs_under_its_execute_tool_span(spans: Spans) -> None:
    instrument(spans.provider)
    model = FakeChatModel([{"tool_calls": [{"name": "summarise", "args": {"text": "long"}}]}, "Done."])
    agent = Agent(llm=model, tools=[summarise], checkpointer=InMemorySaver())

    assert await agent.ainvoke("Summarise it.", thread_id="t") == "Done."

    tool_span = spans.one("execute_tool summarise")  # one: the tool's own LangChain run adds no second span
    chats = spans.named("chat fake-chat-model")
    assert len(chats) == 3
    [inner] = [c for c in chats if parent_of(c) == tool_span.context.span_id]
    assert inner.context.trace_id == tool_span.context.trace_id


@tool
def ask_inner(question: str) -> str:
    """Ask another agent (an Agent run inside a tool)."""
    inner = Agent(llm=FakeChatModel(["Inner answer."]), name="inner")
    return str(inner.invoke(question))


def test_an_agent_run_inside_a_tool_is_its_own_invoke_agent_span_once(spans: Spans) -> None:
    instrument(spans.provider)
    model = FakeChatModel([{"tool_calls": [{"name": "ask_inner", "args": {"question": "q"}}]}, "Done."])
    outer = Agent(llm=model, tools=[ask_inner], name="outer")

    assert outer.invoke("Go.") == "Done."

    outer_span, inner_span = spans.one("invoke_agent outer"), spans.one("invoke_agent inner")
    tool_span = spans.one("execute_tool ask_inner")
    assert parent_of(tool_span) == outer_span.context.span_id
    assert parent_of(inner_span) == tool_span.context.span_id
    chats = spans.named("chat fake-chat-model")
    assert len(chats) == 3
    assert [parent_of(c) for c in chats].count(inner_span.context.span_id) == 1


@pytest.mark.parametrize("failing", ["raises", "to_model"])
async def test_an_async_failing_tool_ends_its_span_with_error_status(spans: Spans, failing: str) -> None:
    instrument(spans.provider)
    model = FakeChatModel([{"tool_calls": [{"name": "explode", "args": {"query": "q"}}]}, "Sorry."])
    agent = Agent(llm=model, tools=[explode], tool_errors="raise" if failing == "raises" else "model")

    if failing == "raises":
        with pytest.raises(ValueError, match="cannot use"):
            await agent.ainvoke("go")
    else:
        assert await agent.ainvoke("go") == "Sorry."

    tool_span = spans.one("execute_tool explode")
    assert tool_span.status.status_code == StatusCode.ERROR
    assert (tool_span.attributes or {})["error.type"] == tool_span.status.description == "ValueError"
    root = spans.one("invoke_agent Agent")
    assert root.status.status_code == (StatusCode.ERROR if failing == "raises" else StatusCode.UNSET)
    assert SENTINEL not in spans.text()


def test_a_failing_model_call_ends_its_chat_span_with_error_status(spans: Spans) -> None:
    instrument(spans.provider)

    def fail(messages: Any, tools: Any) -> str:
        raise ValueError(f"provider said {SENTINEL}")

    agent = Agent(llm=FunctionChatModel(fail))

    with pytest.raises(ValueError):
        agent.invoke("go")

    chat = spans.one("chat fake-chat-model")
    assert chat.status.status_code == StatusCode.ERROR and chat.status.description == "ValueError"
    assert spans.one("invoke_agent Agent").status.status_code == StatusCode.ERROR
    assert SENTINEL not in spans.text()


@dataclasses.dataclass
class Creds:
    """A dataclass context."""

    api_token: str


@pytest.mark.parametrize("capture_content", [False, True])
def test_a_deep_agent_subagent_call_under_instrument(spans: Spans, capture_content: bool) -> None:
    instrument(spans.provider, capture_content=capture_content)
    task = {"name": "task", "args": {"description": "Find facts.", "subagent_type": "researcher"}}
    model = FakeChatModel(
        [{"tool_calls": [task]}, {"tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]}, "Facts found.", "Final."]
    )
    # (the subagent's tool does not read the context: deepagents' subagents serialise it with a pydantic warning,
    # which fails a tool that takes the runtime under this suite's warnings-as-errors, traced or not)
    subagent = {"name": "researcher", "description": "Finds facts.", "system_prompt": "Be brief.", "tools": [add]}
    deep = DeepAgent(llm=model, checkpointer=False, name="lead", subagents=[subagent], context_schema=Creds)

    assert deep.invoke("Plan it.", context=Creds(api_token=SENTINEL)) == "Final."

    lead, researcher = spans.one("invoke_agent lead"), spans.one("invoke_agent researcher")
    task_span, add_span = spans.one("execute_tool task"), spans.one("execute_tool add")
    assert lead.parent is None
    assert parent_of(task_span) == lead.context.span_id
    assert parent_of(researcher) == task_span.context.span_id
    assert parent_of(add_span) == researcher.context.span_id
    assert add_span.status.status_code == StatusCode.UNSET
    chats = spans.named("chat fake-chat-model")
    assert len(chats) == 4  # two of the lead's, two of the researcher's: none twice
    assert [parent_of(c) for c in chats].count(lead.context.span_id) == 2
    assert [parent_of(c) for c in chats].count(researcher.context.span_id) == 2
    assert len({s.context.trace_id for s in spans.all()}) == 1
    assert SENTINEL not in spans.text()
    assert ("gen_ai.tool.call.result" in (add_span.attributes or {})) is capture_content
    assert ("Find facts." in spans.text()) is capture_content


def test_a_durable_session_turn_under_instrument(spans: Spans) -> None:
    from ai_utils.sessions import memory_sessions

    instrument(spans.provider)
    model = FakeChatModel([{"tool_calls": [{"name": "whoami", "args": {"query": "me"}}]}, "You are you."])
    tools = [durable_tool(whoami, idempotent=True)]
    agent = Agent(llm=model, tools=tools, sessions=memory_sessions(), context_schema=Secrets, name="desk")
    session = agent.session(context=Secrets(api_token=SENTINEL))

    assert session.prompt("Who am I?").result(timeout=60).output == "You are you."

    root = spans.one("invoke_agent desk")
    assert sorted(s.name for s in spans.all()) == [
        "chat fake-chat-model",
        "chat fake-chat-model",
        "execute_tool whoami",
        "invoke_agent desk",
    ]
    for span in spans.all():
        assert (span.attributes or {})["gen_ai.conversation.id"] == session.id
        assert span is root or parent_of(span) == root.context.span_id
    assert SENTINEL not in spans.text()


def aside_chain() -> Any:
    return ChatPromptTemplate.from_messages([("human", "{text}")]) | FakeChatModel(["Aside."], cycle=True)


def assert_stream_tree(spans: Spans, chunks: int) -> None:
    root = spans.one("invoke_agent calc")
    chats = spans.named("chat fake-chat-model")
    assert chunks >= 2 and len(chats) == 2 + chunks
    assert [parent_of(c) for c in chats].count(root.context.span_id) == 2  # the run's own, once each
    assert [c.parent for c in chats].count(None) == chunks  # the consumer's: not part of the run, not suppressed
    assert parent_of(spans.one("execute_tool add")) == root.context.span_id


def test_a_stream_traces_itself_and_the_consumers_own_runs_are_traced_as_usual(spans: Spans) -> None:
    instrument(spans.provider)
    aside, chunks = aside_chain(), 0
    for _ in calculator().stream("What is 2 + 3?", thread_id="t"):
        chunks += 1
        aside.invoke({"text": "between chunks"})  # the consumer's own LangChain run
    assert_stream_tree(spans, chunks)


async def test_an_astream_traces_itself_and_the_consumers_own_runs_are_traced_as_usual(spans: Spans) -> None:
    instrument(spans.provider)
    aside, chunks = aside_chain(), 0
    async for _ in calculator().astream("What is 2 + 3?", thread_id="t"):
        chunks += 1
        await aside.ainvoke({"text": "between chunks"})
    assert_stream_tree(spans, chunks)


def assert_closed_early(spans: Spans) -> None:
    root = spans.one("invoke_agent Agent")
    assert root.status.status_code == StatusCode.UNSET  # the consumer stopped reading: nothing failed
    assert parent_of(spans.one("chat fake-chat-model")) == root.context.span_id


def test_a_stream_closed_early_ends_its_span(spans: Spans) -> None:
    stream = Agent(llm=FakeChatModel(["One two three four."]), tracer_provider=spans.provider).stream("Count.")
    next(stream)
    stream.close()
    assert_closed_early(spans)


async def test_an_astream_closed_early_ends_its_span(spans: Spans) -> None:
    astream = Agent(llm=FakeChatModel(["One two three four."]), tracer_provider=spans.provider).astream("Count.")
    await anext(astream)
    await astream.aclose()  # type: ignore[attr-defined]
    assert_closed_early(spans)


def test_a_chat_span_follows_its_model_when_the_models_fields_change(spans: Spans) -> None:
    # The chat attributes are remembered per model instance; a changed field computes them again.
    model = FunctionChatModel(fn=lambda messages, tools: "ok", model_name="model-a")
    other = FunctionChatModel(fn=lambda messages, tools: "ok", model_name="model-b")
    first = Agent(llm=model, tracer_provider=spans.provider)
    second = Agent(llm=other, tracer_provider=spans.provider)

    first.invoke("hi")
    second.invoke("hi")
    model.model_name = "model-c"
    model.temperature = 0.25
    first.invoke("hi")

    names = [s.name for s in spans.all() if s.name.startswith("chat")]
    assert names == ["chat model-a", "chat model-b", "chat model-c"]
    last = dict(spans.one("chat model-c").attributes or {})
    assert last["gen_ai.request.model"] == "model-c" and last["gen_ai.request.temperature"] == 0.25
    assert "gen_ai.request.temperature" not in dict(spans.one("chat model-a").attributes or {})


def test_remembering_a_models_chat_attributes_does_not_keep_the_model_alive(spans: Spans) -> None:
    model = FunctionChatModel(fn=lambda messages, tools: "ok", model_name="short-lived")
    Agent(llm=model, tracer_provider=spans.provider).invoke("hi")
    gone = weakref.ref(model)
    del model
    gc.collect()

    assert spans.one("chat short-lived") is not None
    assert gone() is None
