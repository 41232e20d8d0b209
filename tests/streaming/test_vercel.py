"""`to_vercel_ai`: chunk streams and session logs as AI SDK UI message chunks, read by the `ai` package under Node."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

from _services import require_node_package
from _ui_samples import APPROVAL, EVERYTHING, SECRET, failing, turn

from ai_utils import to_vercel_ai
from ai_utils.client import StreamChunk

PARSER = Path(__file__).parent / "vercel_parse.mjs"


async def chunks_of(source: Iterable[Any] | AsyncIterator[Any], **options: Any) -> list[dict[str, Any]]:
    return [chunk async for chunk in to_vercel_ai(source, **options)]


def read_with_the_ai_sdk(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What the AI SDK's transport parses from these chunks sent as SSE, and the message it builds."""
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    config = {"modules": {"ai": require_node_package("ai/dist/index.js").as_uri()}, "body": body}
    proc = subprocess.run(
        ["node", str(PARSER), json.dumps(config)], capture_output=True, text=True, timeout=60, env=os.environ
    )
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(c["success"] for c in report["chunks"]), [c for c in report["chunks"] if not c["success"]]
    return report


async def test_every_chunk_kind_parses_with_the_ai_sdk_schema_and_the_vocabulary_is_pinned() -> None:
    chunks = await chunks_of(EVERYTHING, message_id="msg-1")

    assert {c["type"] for c in chunks} == {
        "start",
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-available",
        "tool-output-available",
        "tool-output-error",
        "tool-approval-request",
        "steering-message",
        "data-mode",
        "data-custom",
        "data-subagent",
        "data-action",
        "data-follow_up",
        "finish",
    }
    assert chunks[0] == {"type": "start", "messageId": "msg-1"}
    assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}
    report = read_with_the_ai_sdk(chunks)
    assert report["errors"] == []
    message = report["message"]
    assert message["id"] == "msg-1" and message["role"] == "assistant"
    parts = {p["type"]: p for p in message["parts"]}
    assert parts["reasoning"]["text"] == "Anna wants a mail."
    assert parts["tool-lookup"]["state"] == "output-available" and parts["tool-lookup"]["output"] == "anna@example.com"
    assert parts["tool-flaky"]["state"] == "output-error" and parts["tool-flaky"]["errorText"] == "Error: timeout"
    assert parts["data-action"]["data"] == {"id": "refund", "status": "valid", "params": {"amount": 5}}
    assert parts["steering-message"]["parts"] == [{"type": "text", "text": "Und Bob auch."}]
    approval = parts["tool-send_mail"]
    assert approval["state"] == "approval-requested" and approval["toolCallId"] == "c3"
    assert approval["approval"] == {"id": "int-1", "requestReason": "Send this mail?"}


async def test_an_approval_for_a_call_not_shown_gets_its_input_part_first() -> None:
    chunks = await chunks_of([APPROVAL])
    assert [c["type"] for c in chunks] == ["start", "tool-input-available", "tool-approval-request", "finish"]
    assert chunks[1] == {
        "type": "tool-input-available",
        "toolCallId": "int-1",
        "toolName": "send_mail",
        "input": {"to": "anna@example.com"},
    }
    assert read_with_the_ai_sdk(chunks)["message"]["parts"][0]["state"] == "approval-requested"


async def test_a_result_of_a_call_the_client_already_holds_needs_no_input_part() -> None:
    end = {"kind": "tool", "phase": "end", "tool_name": "send_mail", "id": "c3", "output": "sent", "status": "success"}
    fresh = await chunks_of([end])
    assert [c["type"] for c in fresh][1:3] == ["tool-input-available", "tool-output-available"]

    from ai_utils.streaming._vercel import VercelEncoder

    known = VercelEncoder(message_id="m-1", known_tool_calls=["c3"])
    assert [e["type"] for e in known.feed(end)] == ["start", "tool-output-available"]


async def test_a_failure_closes_open_parts_then_sends_one_error_and_no_finish() -> None:
    chunks = await chunks_of(failing(["partial ", {"kind": "reasoning", "text": "hm"}], RuntimeError(SECRET)))
    assert [c["type"] for c in chunks] == [
        "start",
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "error",
    ]
    assert SECRET not in chunks[-1]["errorText"] and "RuntimeError" in chunks[-1]["errorText"]
    report = read_with_the_ai_sdk(chunks)
    assert report["errors"] == [chunks[-1]["errorText"]]  # the SDK reports it; every part was closed before
    assert all(p.get("state") == "done" for p in report["message"]["parts"])


async def test_a_session_log_is_one_message_with_transient_turn_events() -> None:
    log = turn("T1", ["Hallo. "]) + turn("T2", ["Noch ", "da."], stop="max_model_turns")
    lines: list[Any] = [{"cursor": n, "chunk": chunk} for n, chunk in enumerate(log, start=1)]
    chunks = await chunks_of(lines)

    assert chunks[0] == {"type": "start", "messageId": "T1"}  # the first turn names the message
    turn_events = [c for c in chunks if c["type"].startswith("data-turn")]
    assert [c["type"] for c in turn_events] == ["data-turn_start", "data-turn_end", "data-turn_start", "data-turn_end"]
    assert all(c["transient"] for c in turn_events)
    assert chunks[-1] == {"type": "finish", "finishReason": "length"}
    message = read_with_the_ai_sdk(chunks)["message"]
    assert [p["text"] for p in message["parts"] if p["type"] == "text"] == ["Hallo. ", "Noch da."]


async def test_a_failed_turn_ends_the_message_with_a_generic_error() -> None:
    log = turn("T1", ["x"], stop="error", error={"type": "RuntimeError", "message": SECRET})
    source: list[StreamChunk] = log
    chunks = await chunks_of(source)
    assert chunks[-1]["type"] == "error" and SECRET not in chunks[-1]["errorText"]
    assert "finish" not in [c["type"] for c in chunks]
