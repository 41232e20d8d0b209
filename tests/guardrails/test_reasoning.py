"""Reasoning is answer text: a secret in ``reasoning_content`` or a reasoning block is redacted like the answer."""

from __future__ import annotations

from typing import Any

import pytest
from guardrails._secrets import SECRETS
from langchain_core.messages import AIMessage

from ai_utils import Agent, MemorySaver, guardrails
from ai_utils.client import is_reasoning_event
from ai_utils.testing import FakeChatModel

AWS, AWS_TEXT = SECRETS["aws_access_key"]
GITHUB, GITHUB_TEXT = SECRETS["github_token"]


def _replies(shape: str) -> Any:
    """One answer whose reasoning holds a key, in each shape providers use."""
    if shape == "reasoning_content":  # DeepSeek / OpenAI-compatible
        return {"content": "Rotated.", "reasoning": f"The user pasted {AWS_TEXT}, rotate it."}
    if shape == "v1_block":  # LangChain standard content blocks
        blocks = [{"type": "reasoning", "reasoning": f"they pasted {AWS_TEXT}"}, {"type": "text", "text": "Rotated."}]
    elif shape == "thinking_block":  # Anthropic extended thinking
        blocks = [{"type": "thinking", "thinking": f"they pasted {AWS_TEXT}", "signature": "sig"}, "Rotated."]
    else:  # OpenAI Responses reasoning summary
        summary = [{"type": "summary_text", "text": f"they pasted {AWS_TEXT}"}]
        blocks = [{"type": "reasoning", "id": "rs_1", "summary": summary}, {"type": "text", "text": "Rotated."}]
    return AIMessage(content=blocks)


SHAPES = ["reasoning_content", "v1_block", "thinking_block", "responses_summary"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("pack", ["standard", "strict"])
def test_a_key_in_reasoning_is_never_checkpointed(shape: str, pack: str) -> None:
    # The attack: the model "thinks out loud" about the key the user pasted; the stored thread must not keep it.
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([_replies(shape), "ok"])
    agent = Agent(
        llm=model,
        checkpointer=MemorySaver(),
        middleware=guardrails(pack, on_decision=decisions.append),  # type: ignore[arg-type]
    )

    assert agent.invoke("rotate my key", thread_id="t") == "Rotated."
    agent.invoke("thanks", thread_id="t")

    stored = agent.graph.get_state({"configurable": {"thread_id": "t"}}).values["messages"]
    assert AWS not in repr(stored)
    assert "[REDACTED:aws_access_key]" in repr(stored[1])
    assert AWS not in repr(model.calls[1])  # nor does the next call send it back
    assert {"policy_id": "secret.aws_access_key", "phase": "output", "action": "redact", "risk": "high"} in decisions


@pytest.mark.parametrize("shape", SHAPES)
def test_a_key_in_reasoning_is_never_streamed_under_strict(shape: str) -> None:
    agent = Agent(llm=FakeChatModel([_replies(shape)]), middleware=guardrails("strict"))

    chunks = list(agent.stream("rotate my key", show_reasoning=True))

    assert AWS not in repr(chunks)
    assert "".join(c for c in chunks if isinstance(c, str)) == "Rotated."
    if shape in ("reasoning_content", "v1_block"):  # the shapes LangChain shows as reasoning chunks
        assert any(is_reasoning_event(c) and "[REDACTED:aws_access_key]" in c["text"] for c in chunks)


async def test_reasoning_and_text_with_the_same_key_report_one_decision() -> None:
    decisions: list[dict[str, Any]] = []
    reply = {"content": f"Your token {GITHUB_TEXT}", "reasoning": f"token is {GITHUB_TEXT}"}
    agent = Agent(llm=FakeChatModel([reply]), middleware=guardrails("strict", on_decision=decisions.append))
    chunks = [c async for c in agent.astream("token?", show_reasoning=True)]
    assert GITHUB not in repr(chunks)
    assert decisions == [{"policy_id": "secret.github_token", "phase": "output", "action": "redact", "risk": "high"}]
