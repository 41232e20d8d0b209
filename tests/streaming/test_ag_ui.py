"""`to_ag_ui`: chunk streams and session logs as AG-UI events, checked against ``ag_ui.core``'s own models."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import orjson
import pytest
from _ui_samples import APPROVAL, EVERYTHING, SECRET, failing, turn
from ag_ui.core import Event, EventType, RunFinishedEvent
from dirty_equals import IsStr
from pydantic import TypeAdapter, ValidationError

from ai_utils import to_ag_ui
from ai_utils.client import InterruptEvent, StreamChunk
from ai_utils.streaming._ag_ui import ApprovalPayload, approval_decision

EVENT = TypeAdapter(Event)


async def events_of(chunks: Iterable[Any] | AsyncIterator[Any], **options: Any) -> list[dict[str, Any]]:
    events = [event async for event in to_ag_ui(chunks, **options)]
    for event in events:
        EVENT.validate_python(event)  # the protocol's own models accept every event we send
    return events


async def test_every_chunk_kind_becomes_valid_ag_ui_events_and_the_vocabulary_is_pinned() -> None:
    events = await events_of(EVERYTHING, thread_id="t-1", run_id="r-1")

    assert {e["type"] for e in events} == {
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "CUSTOM",
        "RUN_FINISHED",
    }
    assert {e["type"] for e in events} <= {t.value for t in EventType}
    assert events[0] == {"type": "RUN_STARTED", "threadId": "t-1", "runId": "r-1", "protocolVersion": "1.0"}
    assert [e["name"] for e in events if e["type"] == "CUSTOM"] == ["mode", "custom", "subagent", "action", "follow_up"]
    action = next(e for e in events if e.get("name") == "action")
    assert action["value"] == {"id": "refund", "status": "valid", "params": {"amount": 5}}
    assert [e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT"] == ["Anna wants ", "a mail."]
    text = [e for e in events if e["type"].startswith("TEXT_MESSAGE")]
    assert [e.get("role") for e in text if e["type"] == "TEXT_MESSAGE_START"] == ["assistant", "user", "assistant"]
    first_text = text[0]["messageId"]
    assert [e["delta"] for e in text if e.get("messageId") == first_text and "delta" in e] == ["Ich ", "schreibe. "]
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert start == {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "lookup",
        "parentMessageId": first_text,
    }
    assert next(e for e in events if e["type"] == "TOOL_CALL_ARGS")["delta"] == '{"key":"anna"}'
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert results[0] == {
        "type": "TOOL_CALL_RESULT",
        "messageId": IsStr(),
        "toolCallId": "c1",
        "content": "anna@example.com",
        "role": "tool",
    }
    assert results[1]["metadata"] == {"status": "error"}


async def test_an_interrupt_ends_the_run_with_an_interrupt_outcome_tied_to_its_tool_call() -> None:
    events = await events_of(EVERYTHING, thread_id="t-1", run_id="r-1")

    finished = RunFinishedEvent.model_validate(events[-1])
    assert events[-1]["type"] == "RUN_FINISHED" and finished.outcome is not None
    assert sum(e["type"] == "RUN_FINISHED" for e in events) == 1
    interrupt = events[-1]["outcome"]["interrupts"][0]
    assert events[-1]["outcome"]["type"] == "interrupt"
    assert interrupt["id"] == "int-1" and interrupt["toolCallId"] == "c3"
    assert interrupt["reason"] == "tool_approval" and interrupt["message"] == "Send this mail?"
    assert interrupt["metadata"] == {
        "decisions": ["approve", "reject"],
        "toolName": "send_mail",
        "args": {"to": "anna@example.com"},
    }
    assert interrupt["responseSchema"]["properties"]["approved"] == {"title": "Approved", "type": "boolean"}
    assert interrupt["responseSchema"]["required"] == ["approved"]


async def test_a_plain_interrupt_and_a_batch_become_interrupts_of_one_outcome() -> None:
    plain: InterruptEvent = {
        "kind": "interrupt",
        "id": "q-1",
        "question": "Which day?",
        "decisions": [],
        "tool_name": None,
        "args": None,
        "options": ["Mon", "Tue"],
    }
    second = {**APPROVAL, "id": "int-2"}
    events = await events_of([{"kind": "interrupt", "items": [plain, second]}])
    interrupts = events[-1]["outcome"]["interrupts"]
    assert [i["id"] for i in interrupts] == ["q-1", "int-2"]
    assert interrupts[0] == {
        "id": "q-1",
        "reason": "input",
        "message": "Which day?",
        "metadata": {"decisions": [], "options": ["Mon", "Tue"]},
    }
    assert "toolCallId" not in interrupts[1]  # its call was not shown in this stream


@pytest.mark.parametrize(
    ("chunks", "closing"),
    [
        ([{"kind": "reasoning", "text": "thinking"}, "partial "], ["TEXT_MESSAGE_END"]),
        (["partial ", {"kind": "reasoning", "text": "thinking"}], ["REASONING_MESSAGE_END", "REASONING_END"]),
    ],
)
async def test_a_failure_closes_open_parts_then_sends_one_run_error_and_nothing_after(
    caplog: pytest.LogCaptureFixture, chunks: list[StreamChunk], closing: list[str]
) -> None:
    with caplog.at_level(logging.ERROR, logger="ai_utils.streaming"):
        events = await events_of(failing(chunks, RuntimeError(f"db down ({SECRET})")), thread_id="t")

    types = [e["type"] for e in events]
    assert types[-len(closing) - 1 :] == [*closing, "RUN_ERROR"]
    assert types.count("RUN_ERROR") == 1 and "RUN_FINISHED" not in types
    error = events[-1]
    assert error["code"] == "RuntimeError" and SECRET not in error["message"]
    assert error["metadata"]["errorId"] in error["message"]
    assert any(error["metadata"]["errorId"] in r.getMessage() for r in caplog.records)  # the full text is logged
    starts = {e["messageId"] for e in events if e["type"].endswith("_START")}
    ends = {e["messageId"] for e in events if e["type"].endswith("_END")}
    assert starts == ends  # every part opened was closed before the error


async def test_an_error_line_in_the_stream_is_the_terminal_event_and_later_chunks_are_dropped() -> None:
    chunks: list[Any] = ["a", {"kind": "error", "type": "UserError", "message": "bad decision"}, "never shown"]
    events = await events_of(chunks)
    assert [e["type"] for e in events] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    assert events[-1]["message"] == "bad decision"


async def test_an_empty_stream_is_one_empty_run() -> None:
    events = await events_of([], thread_id="t", run_id="r")
    assert events == [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "protocolVersion": "1.0"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"}},
    ]


async def test_a_session_log_is_one_run_per_turn_with_ids_from_the_cursors() -> None:
    log = turn("T1", ["Hallo."]) + turn("T2", ["Nein", {"kind": "turn_resume", "turn_id": "T2"}], stop="cancelled")
    log += turn("T3", ["x"], stop="error", error={"type": "RuntimeError", "message": SECRET})
    lines = [{"cursor": n, "chunk": chunk} for n, chunk in enumerate(log, start=1)]

    events = await events_of(lines, thread_id="s-1")
    again = await events_of(lines, thread_id="s-1")

    runs = [(e["type"], e.get("runId")) for e in events if e["type"].startswith("RUN_")]
    assert runs == [
        ("RUN_STARTED", "T1"),
        ("RUN_FINISHED", "T1"),
        ("RUN_STARTED", "T2"),
        ("RUN_FINISHED", "T2"),
        ("RUN_STARTED", "T3"),
        ("RUN_ERROR", None),
    ]
    finished = [e for e in events if e["type"] == "RUN_FINISHED"]
    assert finished[0]["outcome"] == {"type": "success"} and finished[1]["outcome"] == {"type": "cancelled"}
    assert finished[0]["usage"] == [{"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}]
    assert events[-1]["code"] == "RuntimeError" and SECRET not in events[-1]["message"]  # not our error: generic
    assert [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"] == ["msg-2", "msg-5", "msg-9"]
    assert events == again  # a replay from the same cursor gives the client the same ids


async def test_a_failed_turn_with_our_own_error_keeps_its_message() -> None:
    log = turn("T1", [], stop="error", error={"type": "UserError", "message": "decision 'maybe' is not allowed"})
    events = await events_of([{"cursor": n, "chunk": c} for n, c in enumerate(log, start=1)])
    assert events[-1]["message"] == "decision 'maybe' is not allowed"


@pytest.mark.parametrize(
    ("payload", "decision"),
    [
        ({"approved": True}, "approve"),
        ({"approved": False}, {"type": "reject"}),
        ({"approved": False, "reason": "Not today"}, {"type": "reject", "message": "Not today"}),
        (
            {"approved": True, "editedArgs": {"to": "bob@example.com"}},
            {"type": "edit", "args": {"to": "bob@example.com"}},
        ),
    ],
)
def test_an_approval_payload_maps_to_the_decision_it_stands_for(payload: dict[str, Any], decision: Any) -> None:
    assert approval_decision(ApprovalPayload.model_validate(payload)) == decision


@pytest.mark.parametrize("payload", [{"approved": "true"}, {"approved": 1}, {}, {"approved": True, "admin": True}])
def test_an_approval_payload_approves_only_with_a_json_true(payload: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ApprovalPayload.model_validate(payload)


async def test_the_sse_body_is_byte_for_byte_what_ag_ui_protocols_own_encoder_writes() -> None:
    # The route's frames are built by hand (a text token is a pre-built prefix + its JSON string), so the
    # bytes are pinned against ``ag_ui.encoder.EventEncoder`` over the same events parsed into its models.
    from ag_ui.encoder import EventEncoder

    from ai_utils.streaming._ag_ui import AgUiEncoder
    from ai_utils.streaming._ui import aencode_events

    async def source() -> AsyncIterator[Any]:
        for chunk in EVERYTHING:
            yield chunk

    body = b"".join([frame async for frame in aencode_events(AgUiEncoder(thread_id="t", run_id="r"), source())])
    frames = [frame for frame in body.split(b"\n\n") if frame]
    library = EventEncoder()
    for frame in frames:
        assert frame.startswith(b"data: ")
        event = EVENT.validate_json(frame[len(b"data: ") :])
        ours = orjson.loads(frame[len(b"data: ") :])
        if ours["type"].startswith("TEXT_MESSAGE"):  # the frames the hot path writes: the very same bytes
            assert library.encode(event).encode() == frame + b"\n\n"
        else:  # other events may order their keys differently from the models' field order
            assert orjson.loads(library.encode(event)[len("data: ") :]) == ours
    assert sum(b'"TEXT_MESSAGE_CONTENT"' in frame for frame in frames) >= 2  # the hand-built token frames are in it


async def test_session_frames_carry_each_lines_cursor_and_values_json_refuses_take_the_ndjson_fallbacks() -> None:
    # A stored line's events are one body part whose last frame carries the line's cursor as its SSE id; an
    # event orjson refuses as it is (a non-str key, a path) is written as the NDJSON lines write it.
    from pathlib import PurePosixPath

    from ai_utils.streaming._ag_ui import AgUiEncoder
    from ai_utils.streaming._encode import json_value
    from ai_utils.streaming._ui import aencode_events

    lines = [
        {"cursor": 1, "chunk": {"kind": "turn_start", "turn_id": "t1"}},
        {"cursor": 2, "chunk": "Hi"},
        {"cursor": 3, "chunk": {"kind": "custom", "data": {1: PurePosixPath("/tmp/x")}}},
        {"cursor": 4, "chunk": {"kind": "turn_end", "turn_id": "t1", "stop_reason": "end_turn"}},
    ]

    async def source() -> AsyncIterator[Any]:
        for line in lines:
            yield line

    parts = [part async for part in aencode_events(AgUiEncoder(thread_id="s", session=True), source())]
    expected_encoder = AgUiEncoder(thread_id="s", session=True)
    expected = []
    for line in lines:
        frames = [
            b"data: " + json_value(event) + b"\n\n" for event in expected_encoder.feed(line["chunk"], line["cursor"])
        ]
        frames[-1] = b"id: %d\n" % line["cursor"] + frames[-1]
        expected.append(b"".join(frames))
    assert parts == expected
    assert b'"value":{"data":{"1":"/tmp/x"}}' in parts[2]
    assert parts[1].count(b"data: ") == 2 and parts[1].count(b"id: 2\n") == 1  # TEXT_MESSAGE_START, _CONTENT
