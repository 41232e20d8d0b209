"""Durable sessions over real HTTP (uvicorn, a SQLite session store), NDJSON: create, prompt, stream and reconnect
by cursor while the turn runs, steer, cancel, a retried prompt, and who may see a session."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import LiveServer
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from starlette.applications import Starlette
from starlette.routing import Mount

from ai_utils import Agent, durable_tool, postgres_sessions, session_routes, sqlite_sessions
from ai_utils.sessions import SessionStore
from ai_utils.testing import FunctionChatModel

ALICE = {"authorization": "Bearer alice-token"}
BOB = {"authorization": "Bearer bob-token"}
JSON = {"content-type": "application/json"}
API = "/api/sessions"


def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
    asked = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and str(m.content).startswith("slow"))
    if any(isinstance(m, ToolMessage) for m in messages[asked:]):
        return "Fertig."
    return {"content": "Warte. ", "tool_calls": [{"name": "wait_for_release", "args": {}}]}


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # never leave a tool waiting


@pytest.fixture
def slow_store(tmp_path: Path) -> Iterator[SessionStore]:
    store = sqlite_sessions(tmp_path / "slow.sqlite", lease_seconds=5)
    yield store
    store.close()  # type: ignore[attr-defined]


@pytest.fixture
def server(
    serve: Callable[[Any], LiveServer], app: Any, slow_store: SessionStore, release: threading.Event, authenticate: Any
) -> Iterator[httpx.Client]:
    def wait_for_release() -> str:
        """Wait until the test releases the tool."""
        assert release.wait(30), "the test never released the tool"
        return "freigegeben"

    agent = Agent(
        llm=FunctionChatModel(reply),
        tools=[durable_tool(wait_for_release, idempotent=True)],
        sessions=slow_store,
        name="slow",
    )
    live = serve(app(session_routes(agent, path="/api/sessions", authenticate=authenticate)))
    with httpx.Client(base_url=live.base_url, timeout=30) as client:
        yield client


def read_until(stream: Iterator[str], kind: str) -> list[dict[str, Any]]:
    """Lines of an open NDJSON stream (``response.iter_lines()``) up to and including the first chunk of ``kind``."""
    lines = []
    for raw in stream:
        if raw:
            line = json.loads(raw)
            lines.append(line)
            chunk = line["chunk"]
            if isinstance(chunk, dict) and chunk.get("kind") == kind:
                return lines
    raise AssertionError(f"the stream ended before a {kind!r} line: {lines}")


def chunks(lines: list[dict[str, Any]]) -> list[Any]:
    return [line["chunk"] for line in lines]


def test_a_session_is_created_prompted_reconnected_by_cursor_steered_and_retried(
    server: httpx.Client, release: threading.Event
) -> None:
    created = server.post(API, headers={**JSON, **ALICE})
    assert created.status_code == 201
    sid = created.json()["session_id"]

    with server.stream(
        "POST", f"{API}/{sid}/prompt", json={"input": "slow", "message_id": "m-1"}, headers=ALICE
    ) as response:
        assert response.status_code == 200 and response.headers["x-session-id"] == sid
        assert response.headers["content-type"] == "application/x-ndjson"
        before = read_until(response.iter_lines(), "tool")  # then the client goes away while the tool runs
    assert before[0]["cursor"] == 1 and before[0]["chunk"]["kind"] == "turn_start"
    assert before[0]["chunk"]["message_id"] == "m-1"
    last = before[-1]["cursor"]

    steered = server.post(f"{API}/{sid}/steer", json={"text": "Und schnell bitte.", "message_id": "s-1"}, headers=ALICE)
    assert steered.status_code == 202 and steered.json() == {"session_id": sid, "message_id": "s-1"}
    release.set()

    rest = [
        json.loads(raw)
        for raw in server.get(f"{API}/{sid}/stream", params={"cursor": last}, headers=ALICE).iter_lines()
        if raw
    ]
    assert [line["cursor"] for line in before + rest] == list(range(1, last + len(rest) + 1))  # every line once
    kinds = [c["kind"] if isinstance(c, dict) else "text" for c in chunks(rest)]
    assert kinds == ["tool", "user_message", "text", "turn_end"]
    assert chunks(rest)[1] == {"kind": "user_message", "text": "Und schnell bitte.", "id": "s-1"}
    assert chunks(rest)[2] == "Fertig." and chunks(rest)[-1]["stop_reason"] == "end_turn"

    retried = server.post(f"{API}/{sid}/prompt", json={"input": "slow", "message_id": "m-1"}, headers=ALICE)
    again = [json.loads(raw) for raw in retried.iter_lines() if raw]
    assert again == before + rest  # a retried prompt runs nothing new: it follows the original turn

    everything = [json.loads(raw) for raw in server.get(f"{API}/{sid}/stream", headers=ALICE).iter_lines() if raw]
    assert everything == before + rest  # no cursor: the whole log
    assert (
        server.get(f"{API}/{sid}/stream", params={"cursor": 10**6}, headers=ALICE).text == ""
    )  # past the end: nothing

    assert server.get(f"{API}/{sid}/stream", headers=BOB).status_code == 404  # bob never sees alice's lines
    assert server.post(f"{API}/{sid}/prompt", json={"input": "slow"}, headers=BOB).status_code == 404


def test_cancel_ends_the_running_turn_as_cancelled(server: httpx.Client, release: threading.Event) -> None:
    sid = server.post(API, headers={**JSON, **ALICE}).json()["session_id"]
    with server.stream("POST", f"{API}/{sid}/prompt", json={"input": "slow"}, headers=ALICE) as response:
        stream = response.iter_lines()
        started = read_until(stream, "tool")
        cancelled = server.post(f"{API}/{sid}/cancel", headers={**JSON, **ALICE})
        assert cancelled.status_code == 202 and cancelled.json() == {"session_id": sid, "cancelled": True}
        rest = read_until(stream, "turn_end")
    end = rest[-1]["chunk"]
    assert end["stop_reason"] == "cancelled"
    tool_end = next(c for c in chunks(rest) if isinstance(c, dict) and c.get("kind") == "tool")
    assert tool_end["phase"] == "end" and tool_end["status"] == "error"
    assert [line["cursor"] for line in started + rest] == list(range(1, len(started) + len(rest) + 1))
    assert server.post(f"{API}/{sid}/cancel", headers={**JSON, **BOB}).status_code == 404


def test_owners_are_kept_in_a_postgres_store_too(
    serve: Callable[[Any], LiveServer], app: Any, authenticate: Any, postgres_uri: str
) -> None:
    store = postgres_sessions(postgres_uri, lease_seconds=5)
    try:
        agent = Agent(llm=FunctionChatModel(lambda messages, tools: "Hallo."), sessions=store, name="pg-support")
        live = serve(app(session_routes(agent, authenticate=authenticate, protocol="vercel-ai")))
        body = {
            "id": f"pg-{uuid.uuid4().hex}",
            "messages": [{"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}],
        }
        with httpx.Client(base_url=live.base_url, timeout=30) as http:
            first = http.post("/sessions", json=body, headers=ALICE)
            assert first.status_code == 200 and '"delta":"Hallo."' in first.text
            taken = http.post("/sessions", json=body, headers=BOB)  # the same chat id, another user
            assert taken.status_code == 404 and taken.json()["type"] == "NotFound"
            assert http.get(f"/sessions/{body['id']}/stream?cursor=0", headers=BOB).status_code == 404
            assert http.get(f"/sessions/{body['id']}/stream?cursor=0", headers=ALICE).status_code == 200
    finally:
        store.close()  # type: ignore[attr-defined]


def test_the_location_of_a_new_session_keeps_the_prefix_the_routes_are_mounted_under(
    serve: Callable[[Any], LiveServer], durable: Agent, authenticate: Any
) -> None:
    live = serve(Starlette(routes=[Mount("/v1", routes=session_routes(durable, authenticate=authenticate))]))
    with httpx.Client(base_url=live.base_url, timeout=30) as client:
        created = client.post("/v1/sessions", headers={**JSON, **ALICE})
        assert created.status_code == 201
        location = created.headers["location"]
        assert location == f"/v1/sessions/{created.json()['session_id']}"
        assert client.get(f"{location}/stream", headers=ALICE).status_code == 200  # the session is there
