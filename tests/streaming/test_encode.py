from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import PurePosixPath
from typing import Any

import pytest

from ai_utils.client import iter_ndjson
from ai_utils.exceptions import ProviderError
from ai_utils.streaming import andjson_lines, encode_chunk, ndjson_lines
from ai_utils.streaming._encode import _dumps_stdlib

CHUNKS: list[Any] = [
    "Grüße, ",
    'line\nbreak \u2028 and "quotes"',
    {"kind": "tool", "phase": "start", "tool_name": "t", "id": "1", "args": {"a": [1, 2.5, None, True]}},
    {
        "kind": "interrupt",
        "items": [
            {
                "kind": "interrupt",
                "id": "x:0",
                "question": "Ok?",
                "decisions": ["approve"],
                "tool_name": "t",
                "args": {"n": 1},
            }
        ],
    },
]


def test_each_chunk_is_one_json_line_and_text_is_a_json_string() -> None:
    lines = [encode_chunk(c) for c in CHUNKS]

    assert lines[0] == '"Grüße, "\n'.encode()
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    assert [json.loads(line) for line in lines] == CHUNKS


def test_the_stdlib_fallback_writes_the_same_lines() -> None:
    for chunk in CHUNKS:
        assert json.loads(_dumps_stdlib(chunk)) == json.loads(encode_chunk(chunk))
        assert _dumps_stdlib(chunk).endswith(b"\n")


def test_values_json_cannot_hold_are_sent_as_text() -> None:
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    where = PurePosixPath("/tmp/report.txt")
    chunk = {
        "kind": "tool",
        "phase": "start",
        "tool_name": "t",
        "id": "1",
        "args": {"when": when, "where": where, 3: "int key"},
    }
    expected = {"when": "2026-01-02T03:04:05+00:00", "where": "/tmp/report.txt", "3": "int key"}

    assert json.loads(encode_chunk(chunk))["args"] == expected
    assert json.loads(_dumps_stdlib(chunk))["args"] == expected


def test_a_failing_sync_stream_ends_with_an_error_line() -> None:
    def chunks() -> Iterator[Any]:
        yield "partial "
        raise ProviderError("upstream said 502", provider="openrouter")

    got = list(iter_ndjson(ndjson_lines(chunks())))

    assert got == ["partial ", {"kind": "error", "type": "ProviderError", "message": "upstream said 502"}]


async def test_a_failing_async_stream_ends_with_an_error_line() -> None:
    async def chunks() -> AsyncIterator[Any]:
        yield "partial "
        raise KeyError()

    got = [json.loads(line) async for line in andjson_lines(chunks())]
    assert got[0] == "partial "
    assert got[1]["type"] == "KeyError" and got[1]["error_id"] in got[1]["message"]  # generic text, logged by id

    exposed = [json.loads(line) async for line in andjson_lines(chunks(), expose_errors=True)]
    assert exposed[1] == {
        "kind": "error",
        "type": "KeyError",
        "message": "KeyError",
        "error_id": got[1]["error_id"],
    } | {"error_id": exposed[1]["error_id"]}


def test_stopping_the_lines_early_closes_the_source() -> None:
    closed: list[bool] = []

    def chunks() -> Iterator[str]:
        try:
            yield from ["a", "b", "c"]
        finally:
            closed.append(True)

    lines = ndjson_lines(chunks())
    assert next(lines) == b'"a"\n'
    lines.close()

    assert closed == [True]


async def test_stopping_the_async_lines_early_closes_the_source() -> None:
    closed: list[bool] = []

    async def chunks() -> AsyncIterator[str]:
        try:
            for c in ["a", "b", "c"]:
                yield c
        finally:
            closed.append(True)

    lines = andjson_lines(chunks())
    assert await anext(lines) == b'"a"\n'
    await lines.aclose()

    assert closed == [True]


def test_a_plain_list_of_chunks_can_be_encoded() -> None:
    assert (
        b"".join(ndjson_lines(["a", {"kind": "reasoning", "text": "b"}])) == b'"a"\n{"kind":"reasoning","text":"b"}\n'
    )


@pytest.mark.parametrize("name", ["encode_chunk", "ndjson_lines", "andjson_lines"])
def test_the_encoder_needs_no_web_framework(name: str) -> None:
    import subprocess
    import sys

    code = (
        f"import sys; import ai_utils.streaming as s; getattr(s, {name!r}); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'rich')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    assert out.strip() == "[]"


def test_the_streaming_package_lists_its_public_names() -> None:
    import ai_utils.streaming as streaming

    assert streaming.__all__ == sorted(streaming.__all__) == dir(streaming)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        streaming.nope  # noqa: B018
