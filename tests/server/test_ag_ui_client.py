"""AG-UI over real HTTP (uvicorn), read by the real AG-UI client: ``@ag-ui/client``'s HttpAgent under Node.

A turn with a tool call that waits for approval, the approval sent back as a ``resume`` entry, a run that fails
after its first event, and requests refused before streaming (no credentials, another actor's thread); then
the same turn through durable session routes and a fresh client reconnecting to the session's log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conftest import LiveServer

from ai_utils import agent_routes, session_routes


def assistant_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]


def test_http_agent_runs_a_turn_answers_the_approval_and_sees_errors(
    serve: Callable[[Any], LiveServer], app: Any, agent: Any, authenticate: Any, node: Any, outbox: Any
) -> None:
    server = serve(app(agent_routes(agent, path="/agui", protocol="ag-ui", authenticate=authenticate)))

    report = node("ag_ui_client.mjs", {"base": server.base_url, "token": "alice-token", "scenario": "agent"})

    first = report["first"]
    assert first["ok"] and first["types"][0] == "RUN_STARTED" and first["types"][-1] == "RUN_FINISHED"
    assert ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"] == [t for t in first["types"] if t.startswith("TOOL")]
    [pending] = first["pending"]  # the client holds the interrupt the run ended with
    assert pending["reason"] == "tool_approval" and pending["message"] == "Send this mail?"
    assert pending["metadata"]["args"] == {"to": "anna@example.com", "subject": "Termin"}
    [call] = next(m for m in first["messages"] if m["role"] == "assistant")["toolCalls"]
    assert pending["toolCallId"] == call["id"] and call["function"]["name"] == "send_mail"

    second = report["second"]
    assert second["ok"] and second["pending"] == []
    assert "TOOL_CALL_RESULT" in second["types"]
    tool_message = next(m for m in second["messages"] if m["role"] == "tool")
    assert tool_message == {
        "id": tool_message["id"],
        "toolCallId": call["id"],
        "role": "tool",
        "content": "Mail an anna@example.com verschickt.",
    }
    assert assistant_texts(second["messages"]) == ["Ich schreibe Anna. ", "Erledigt."]
    assert outbox.sent == [{"to": "anna@example.com", "subject": "Termin"}]  # sent once, after the approval

    failing = report["failing"]
    assert failing["types"][-1] == "RUN_ERROR" and failing["types"].count("RUN_ERROR") == 1
    assert "RUN_FINISHED" not in failing["types"]
    error = failing["events"][-1]
    assert error["code"] == "RuntimeError" and "hunter2" not in error["message"]

    assert report["refused"]["status"] == 401 and report["refused"]["types"] == []
    assert '"type":"Unauthorized"' in report["refused"]["error"]
    assert report["foreign"]["status"] == 404  # bob cannot continue alice's thread


def test_http_agent_drives_a_durable_session_and_reconnects_from_a_cursor(
    serve: Callable[[Any], LiveServer], app: Any, durable: Any, authenticate: Any, node: Any, outbox: Any
) -> None:
    server = serve(app(session_routes(durable, protocol="ag-ui", authenticate=authenticate)))

    report = node(
        "ag_ui_client.mjs", {"base": server.base_url, "token": "alice-token", "scenario": "session", "cursor": 5}
    )

    first, second = report["first"], report["second"]
    assert first["ok"] and len(first["pending"]) == 1
    assert second["ok"] and second["pending"] == []
    assert assistant_texts(second["messages"]) == ["Ich schreibe Anna. ", "Erledigt."]
    assert outbox.sent == [{"to": "anna@example.com", "subject": "Termin"}]

    replay = report["replays"]["0"]  # a fresh client reads the whole log: one run per turn, same message ids
    assert replay["types"].count("RUN_STARTED") == 2 and replay["types"].count("RUN_FINISHED") == 2
    live = [m for m in second["messages"] if m["role"] != "user"]
    assert replay["messages"] == live
    later = report["replays"]["5"]  # from cursor 5: only what came after it
    assert [m["id"] for m in later["messages"]] == [
        m["id"] for m in live if m["role"] == "tool" or m["content"] == "Erledigt."
    ]
