from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

import ai_utils.client as client
from ai_utils.client import (
    aiter_ndjson,
    is_error_event,
    is_interrupt,
    is_interrupt_batch,
    is_reasoning_event,
    is_subagent_event,
    is_tool_event,
    iter_ndjson,
    parse_ndjson_line,
)

ITEM = {"kind": "interrupt", "id": "i1", "question": "Ok?", "decisions": ["approve"], "tool_name": "t", "args": {}}
SAMPLES: dict[str, Any] = {
    "text": "hello",
    "interrupt": ITEM,
    "batch": {"kind": "interrupt", "items": [ITEM, {**ITEM, "id": "i2"}]},
    "tool": {"kind": "tool", "phase": "start", "tool_name": "t", "id": "c1", "args": {}},
    "reasoning": {"kind": "reasoning", "text": "hmm"},
    "subagent": {"kind": "subagent", "text": "x", "namespace": ["tools:1"]},
    "error": {"kind": "error", "type": "ValueError", "message": "bad"},
}
GUARDS = {
    "interrupt": (is_interrupt, {"interrupt", "batch"}),
    "batch": (is_interrupt_batch, {"batch"}),
    "tool": (is_tool_event, {"tool"}),
    "reasoning": (is_reasoning_event, {"reasoning"}),
    "subagent": (is_subagent_event, {"subagent"}),
    "error": (is_error_event, {"error"}),
}


def test_importing_the_client_loads_no_langchain_langgraph_or_pydantic() -> None:
    code = (
        "import sys, ai_utils.client\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langchain', 'langchain_core', 'langgraph', 'pydantic', 'pydantic_core', 'starlette', 'rich')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    assert out.strip() == "[]"


@pytest.mark.parametrize("guard_name", sorted(GUARDS))
def test_each_guard_accepts_exactly_its_own_chunks(guard_name: str) -> None:
    guard, accepted = GUARDS[guard_name]

    assert {name for name, chunk in SAMPLES.items() if guard(chunk)} == accepted
    assert not guard(None) and not guard(["kind"]) and not guard({"text": "no kind"})


def test_public_names_are_sorted_and_importable() -> None:
    assert client.__all__ == sorted(client.__all__)
    assert all(hasattr(client, name) for name in client.__all__)


def test_ndjson_lines_parse_back_into_chunks() -> None:
    lines = ['"hello"\n', b'{"kind":"reasoning","text":"hmm"}\n', "", "   \n", '"Grüße"']

    assert list(iter_ndjson(lines)) == ["hello", {"kind": "reasoning", "text": "hmm"}, "Grüße"]
    assert parse_ndjson_line("\n") is None


@pytest.mark.parametrize("line", ["42", '{"text": "no kind"}', "[1, 2]", '{"kind": 3}'])
def test_a_line_that_is_no_chunk_is_rejected_with_the_line(line: str) -> None:
    with pytest.raises(ValueError, match="Not a stream chunk"):
        parse_ndjson_line(line)


def test_a_line_that_is_no_json_is_rejected() -> None:
    with pytest.raises(ValueError):
        parse_ndjson_line("{not json")


async def test_async_lines_parse_back_into_chunks() -> None:
    async def lines() -> AsyncIterator[str]:
        for line in ['"a"', "", '{"kind":"error","type":"E","message":"m"}']:
            yield line

    assert [c async for c in aiter_ndjson(lines())] == ["a", {"kind": "error", "type": "E", "message": "m"}]
