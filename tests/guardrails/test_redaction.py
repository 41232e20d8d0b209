"""Secret redaction through `Agent`: user input, tool results and the answer, on invoke and on streams."""

from __future__ import annotations

from typing import Any

import pytest
from guardrails._secrets import SECRETS
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from ai_utils import Agent, MemorySaver, guardrails
from ai_utils.client import is_tool_event
from ai_utils.testing import FakeChatModel

KINDS = sorted(SECRETS)


def _seen(model: FakeChatModel) -> str:
    """Everything the model was sent, as one text."""
    return "\n".join(str(m.content) for call in model.calls for m in call)


def _stored(agent: Agent, thread_id: str) -> list[BaseMessage]:
    return list(agent.graph.get_state({"configurable": {"thread_id": thread_id}}).values["messages"])


@pytest.mark.parametrize("kind", KINDS)
def test_secret_in_user_input_never_reaches_the_model_or_the_thread(kind: str) -> None:
    secret, text = SECRETS[kind]
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel(["Noted.", "Still noted."])
    agent = Agent(
        llm=model, checkpointer=MemorySaver(), middleware=guardrails("standard", on_decision=decisions.append)
    )

    assert agent.invoke(f"please remember {text}", thread_id="t") == "Noted."
    # The next turn replays the stored history: it must be the redacted copy.
    assert agent.invoke("what did I tell you?", thread_id="t") == "Still noted."

    seen = _seen(model)
    assert secret not in seen and f"[REDACTED:{kind}]" in seen
    assert all(secret not in str(m.content) for m in _stored(agent, "t"))
    # Scanned once: the second turn does not report the first turn's secret again.
    assert decisions == [{"policy_id": f"secret.{kind}", "phase": "input", "action": "redact", "risk": "high"}]


@pytest.mark.parametrize("kind", KINDS)
def test_secret_in_a_tool_result_is_redacted_before_the_model_and_the_stream_see_it(kind: str) -> None:
    secret, text = SECRETS[kind]

    @tool
    def read_config(name: str) -> str:
        """Read a config file."""
        return f"# {name}\n{text}\n"

    model = FakeChatModel([{"tool_calls": [{"name": "read_config", "args": {"name": "app.env"}}]}, "It is configured."])
    agent = Agent(llm=model, tools=[read_config], middleware=guardrails("standard"))

    chunks = list(agent.stream("show me the config", show_tool_calls=True))

    ends = [c for c in chunks if is_tool_event(c) and c["phase"] == "end"]
    assert len(ends) == 1 and f"[REDACTED:{kind}]" in ends[0]["output"] and secret not in ends[0]["output"]
    assert secret not in _seen(model) and f"[REDACTED:{kind}]" in _seen(model)
    assert "".join(c for c in chunks if isinstance(c, str)) == "It is configured."


@pytest.mark.parametrize("kind", KINDS)
def test_secret_in_the_answer_is_redacted_for_invoke_and_in_the_thread(kind: str) -> None:
    secret, text = SECRETS[kind]
    model = FakeChatModel([f"Here you go: {text}", "Anything else?"])
    agent = Agent(llm=model, checkpointer=MemorySaver(), middleware=guardrails("standard"))

    answer = agent.invoke("give me the credentials", thread_id="t")
    agent.invoke("thanks", thread_id="t")

    assert secret not in answer and f"[REDACTED:{kind}]" in answer
    assert secret not in _seen(model)  # the model's own answer comes back redacted on the next turn


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("pack", ["strict", "buffer"])
def test_buffered_stream_never_carries_an_unredacted_token(kind: str, pack: str) -> None:
    secret, text = SECRETS[kind]
    middleware = guardrails("strict") if pack == "strict" else guardrails("standard", streaming="buffer")
    agent = Agent(llm=FakeChatModel([f"Here you go: {text} done"]), middleware=middleware)

    chunks = [c for c in agent.stream("credentials please") if isinstance(c, str)]

    # Every token of a streamed secret would carry a piece of it; buffering delivers the checked answer whole.
    assert chunks == [f"Here you go: {text} done".replace(secret, f"[REDACTED:{kind}]")]


async def test_async_stream_and_ainvoke_redact_too() -> None:
    secret, text = SECRETS["openai_api_key"]
    model = FakeChatModel([f"key {text}", f"again {text}"])
    agent = Agent(llm=model, checkpointer=MemorySaver(), middleware=guardrails("strict"))

    streamed = "".join([c async for c in agent.astream(f"mine is {text}", thread_id="a") if isinstance(c, str)])
    answer = await agent.ainvoke("and now?", thread_id="a")

    assert secret not in streamed + answer + _seen(model)
    assert streamed == "key OPENAI_API_KEY=[REDACTED:openai_api_key]"


async def test_async_on_decision_is_awaited() -> None:
    got: list[dict[str, Any]] = []

    async def record(event: dict[str, Any]) -> None:
        got.append(event)

    _, text = SECRETS["github_token"]
    agent = Agent(llm=FakeChatModel(["ok"]), middleware=guardrails("standard", on_decision=record))
    await agent.ainvoke(text)
    assert got == [{"policy_id": "secret.github_token", "phase": "input", "action": "redact", "risk": "high"}]


def test_audit_streaming_delivers_tokens_as_they_come_but_stores_the_redacted_answer() -> None:
    secret, text = SECRETS["aws_access_key"]
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([f"it is {text}", "bye"])
    agent = Agent(llm=model, checkpointer=MemorySaver(), middleware=guardrails(on_decision=decisions.append))

    tokens = [c for c in agent.stream("what is my key?", thread_id="s") if isinstance(c, str)]
    agent.invoke("ok", thread_id="s")

    # "audit" (the default) streams without delay and records the decision; the thread keeps only the redacted text.
    assert len(tokens) > 1
    assert {"policy_id": "secret.aws_access_key", "phase": "output", "action": "redact", "risk": "high"} in decisions
    assert secret not in _seen(model) and all(secret not in str(m.content) for m in _stored(agent, "s"))


def test_clean_conversation_passes_unchanged_and_reports_nothing() -> None:
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel(["The sky is blue because of Rayleigh scattering."])
    agent = Agent(llm=model, middleware=guardrails("standard", on_decision=decisions.append))
    assert (
        agent.invoke("Why is the sky blue? ask-me-anything-2024") == "The sky is blue because of Rayleigh scattering."
    )
    assert decisions == []
    assert model.calls[0][-1].content == "Why is the sky blue? ask-me-anything-2024"


def test_structured_answers_are_redacted_field_by_field() -> None:
    class Reply(BaseModel):
        summary: str
        keys: list[str]

    secret, text = SECRETS["aws_access_key"]
    decisions: list[dict[str, Any]] = []
    call = {"name": "Reply", "args": {"summary": f"found {text}", "keys": [secret, "none"]}}
    model = FakeChatModel([{"tool_calls": [call]}, "next"])
    agent = Agent(
        llm=model,
        output=Reply,
        checkpointer=MemorySaver(),
        middleware=guardrails("standard", on_decision=decisions.append),
    )

    answer = agent.invoke("summarise the ticket", thread_id="s")

    assert answer == Reply(
        summary="found aws_access_key_id = [REDACTED:aws_access_key]", keys=["[REDACTED:aws_access_key]", "none"]
    )
    assert all(secret not in str(m) for m in _stored(agent, "s"))  # nor in the output call or its receipt
    assert decisions == [{"policy_id": "secret.aws_access_key", "phase": "output", "action": "redact", "risk": "high"}]


@pytest.mark.timeout(30)  # a quadratic pattern took minutes on this input; linear scanning takes milliseconds
def test_adversarial_tool_output_does_not_stall_the_scan() -> None:
    @tool
    def dump() -> str:
        """Dump a file."""
        return "sk-" * 40_000 + "eyJ-" * 20_000 + "-----BEGIN RSA PRIVATE KEY-----\n" * 2_000

    model = FakeChatModel([{"tool_calls": [{"name": "dump", "args": {}}]}, "done"])
    assert Agent(llm=model, tools=[dump], middleware=guardrails()).invoke("dump it") == "done"
