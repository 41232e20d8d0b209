"""The Vercel AI SDK UI message stream over real HTTP (uvicorn), read by the real client: the ``ai`` package's
Chat core (what ``useChat`` runs), its ``DefaultChatTransport`` and ``readUIMessageStream``, under Node.

A turn with a tool call that waits for approval, the approval answered with ``addToolApprovalResponse`` (the
Chat sends it by itself), a turn that fails after its first chunk, requests refused before streaming; for
durable sessions also the SDK's reconnect (204 when idle) and a replay from a cursor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conftest import LiveServer

from ai_utils import agent_routes, session_routes


def check_approval_turn(report: dict[str, Any]) -> None:
    first = report["first"]
    assert first["status"] == "ready" and first["error"] is None
    user, assistant = first["messages"]
    text, tool = assistant["parts"]
    assert text == {"type": "text", "text": "Ich schreibe Anna. ", "state": "done"}
    assert tool["type"] == "tool-send_mail" and tool["state"] == "approval-requested"
    assert tool["input"] == {"to": "anna@example.com", "subject": "Termin"}
    assert tool["approval"]["requestReason"] == "Send this mail?"
    assert first["finished"] == [{"id": assistant["id"], "finishReason": "tool-calls", "isError": False}]

    second = report["second"]  # the approval was sent by the Chat itself and continued the same message
    assert second["status"] == "ready" and len(second["messages"]) == 2
    answered = second["messages"][1]
    assert answered["id"] == assistant["id"]
    assert [p["type"] for p in answered["parts"]] == ["text", "tool-send_mail", "text"]
    assert answered["parts"][1]["state"] == "output-available"
    assert answered["parts"][1]["output"] == "Mail an anna@example.com verschickt."
    assert answered["parts"][1]["approval"]["approved"] is True
    assert answered["parts"][2]["text"] == "Erledigt."
    assert second["finished"][-1]["finishReason"] == "stop"

    failing = report["failing"]
    assert failing["status"] == "error" and "RuntimeError" in failing["error"] and "hunter2" not in failing["error"]
    failed = failing["messages"][-1]
    assert failed["role"] == "assistant" and all(
        p.get("state") in ("done", "output-available") for p in failed["parts"]
    )

    assert report["refused"]["status"] == "error" and '"type":"Unauthorized"' in report["refused"]["error"]
    assert report["foreign"]["status"] == "error" and '"type":"NotFound"' in report["foreign"]["error"]


def test_the_ai_sdk_chat_runs_a_turn_answers_the_approval_and_sees_errors(
    serve: Callable[[Any], LiveServer], app: Any, agent: Any, authenticate: Any, node: Any, outbox: Any
) -> None:
    server = serve(app(agent_routes(agent, path="/vercel", protocol="vercel-ai", authenticate=authenticate)))

    report = node(
        "vercel_client.mjs", {"base": server.base_url, "token": "alice-token", "api": "/vercel", "chatId": "chat-1"}
    )

    check_approval_turn(report)
    assert outbox.sent == [{"to": "anna@example.com", "subject": "Termin"}]


def test_the_ai_sdk_chat_drives_a_durable_session_and_reconnects(
    serve: Callable[[Any], LiveServer], app: Any, durable: Any, authenticate: Any, node: Any, outbox: Any
) -> None:
    server = serve(app(session_routes(durable, protocol="vercel-ai", authenticate=authenticate)))

    config = {"base": server.base_url, "token": "alice-token", "api": "/sessions", "chatId": "chat-7", "cursor": 0}
    report = node("vercel_client.mjs", config)

    check_approval_turn(report)
    turn_starts = [d for d in report["second"]["data"] if d["type"] == "data-turn_start"]
    assert turn_starts and all(d["transient"] for d in turn_starts)  # onData sees turn events; the message keeps none
    assert report["failing"]["error"].startswith("The turn failed (RuntimeError)")
    assert report["idleReconnect"] is None  # no turn runs: the reconnect route answers 204
    replay = report["replay"]["message"]  # the whole log (three turns) read back as one message
    tools = [p for p in replay["parts"] if p["type"].startswith("tool-")]
    assert [(p["type"], p["state"]) for p in tools] == [
        ("tool-send_mail", "output-available"),
        ("tool-lookup", "output-available"),
    ]
    assert outbox.sent == [{"to": "anna@example.com", "subject": "Termin"}]
