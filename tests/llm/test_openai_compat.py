from __future__ import annotations

from typing import Any

from ai_utils.llm import ChatOpenAICompatible, get_llm
from ai_utils.llm._openai_compat import reasoning_text

StubOpenRouter = Any  # tests/llm/conftest.py::StubOpenRouter


def test_reasoning_text_reads_every_known_field() -> None:
    assert reasoning_text({"reasoning_content": "a", "reasoning": "a"}) == "a"
    assert reasoning_text({"reasoning": "b", "reasoning_details": [{"type": "reasoning.text", "text": "x"}]}) == "b"
    details = [
        {"type": "reasoning.text", "text": "one ", "index": 0},
        {"type": "reasoning.summary", "summary": "two", "index": 1},
        {"type": "reasoning.encrypted", "data": "opaque", "index": 2},
    ]
    assert reasoning_text({"reasoning": None, "reasoning_details": details}) == "one two"
    assert reasoning_text({"reasoning_details": [{"type": "reasoning.encrypted", "data": "opaque"}]}) is None
    assert reasoning_text({"content": "hi", "reasoning": ""}) is None


def test_openrouter_reasoning_deltas_stream_as_reasoning_blocks(stub_openrouter: StubOpenRouter) -> None:
    stub_openrouter.stream_deltas = [
        {
            "role": "assistant",
            "content": "",
            "reasoning": "Plan: ",
            "reasoning_details": [{"type": "reasoning.text", "text": "Plan: ", "format": "unknown", "index": 0}],
        },
        {
            "role": "assistant",
            "content": "",
            "reasoning": None,
            "reasoning_details": [{"type": "reasoning.summary", "summary": "add.", "index": 0}],
        },
        {"role": "assistant", "content": "4"},
    ]
    llm = get_llm("openrouter", "openai/gpt-5.6-luna", base_url=stub_openrouter.base_url, api_key="x", max_retries=0)

    chunks = list(llm.stream("2+2?"))

    reasoning = "".join(b["reasoning"] for c in chunks for b in c.content_blocks if b["type"] == "reasoning")
    assert reasoning == "Plan: add."
    assert "".join(str(c.content) for c in chunks) == "4"
    full = sum(chunks[1:], chunks[0])
    assert full.response_metadata["model_provider"] == "openrouter"
    assert full.response_metadata["finish_reason"] == "stop"


def test_openrouter_message_reasoning_is_kept_in_plain_replies(stub_openrouter: StubOpenRouter) -> None:
    stub_openrouter.message_extra = {"reasoning": "Adding two and two."}
    llm = ChatOpenAICompatible(model="m", base_url=stub_openrouter.base_url, api_key="x", max_retries=0)

    reply = llm.invoke("2+2?")

    assert reply.content == "hi from m"
    assert reply.content_blocks[0] == {"type": "reasoning", "reasoning": "Adding two and two."}
    assert reply.response_metadata["model_provider"] == "openai_compatible"


def test_replies_without_reasoning_have_no_reasoning_block(stub_openrouter: StubOpenRouter) -> None:
    llm = ChatOpenAICompatible(model="m", base_url=stub_openrouter.base_url, api_key="x", max_retries=0)

    reply = llm.invoke("hi")

    assert "reasoning_content" not in reply.additional_kwargs
    assert [b["type"] for b in reply.content_blocks] == ["text"]
