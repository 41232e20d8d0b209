"""Double texting and image prompts over real HTTP (uvicorn, a SQLite session store), NDJSON (SPEC §14b, §20).

A prompt sent while another turn of the session runs: ``on_busy="reject"`` answers 409 with the JSON error
object and stores nothing; ``"interrupt"`` and ``"rollback"`` cancel the running turn and stream the new one;
the routes' own ``on_busy=`` is the default of a prompt that names none. A prompt's ``input`` may be content
blocks: the image reaches the model server as image content; a bad image is a 400 and stores nothing. The AI SDK's
Chat (an image file part) and AG-UI's HttpAgent (an image part) send images the same way.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from _media import png
from _services import Aimock
from conftest import LiveServer
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ai_utils import Agent, UserError, durable_tool, get_llm, session_routes, sqlite_sessions
from ai_utils.sessions import SessionStore
from ai_utils.testing import FunctionChatModel

ALICE = {"authorization": "Bearer alice-token"}
JSON = {"content-type": "application/json"}
API = "/api/sessions"
RED = png(2, 2)


def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
    """``"slow ..."`` calls the waiting tool once; anything else is answered at once."""
    last = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    said = messages[last].text
    if said.startswith("slow") and not any(isinstance(m, ToolMessage) for m in messages[last:]):
        return {"tool_calls": [{"name": "wait_for_release", "args": {}}]}
    return f"Antwort auf {said!r}"


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # never leave a tool waiting


@pytest.fixture
def slow_store(tmp_path: Path) -> Iterator[SessionStore]:
    store = sqlite_sessions(tmp_path / "busy.sqlite", lease_seconds=5)
    yield store
    store.close()  # type: ignore[attr-defined]


@pytest.fixture
def slow_agent(slow_store: SessionStore, release: threading.Event) -> Agent:
    def wait_for_release() -> str:
        """Wait until the test releases the tool."""
        assert release.wait(30), "the test never released the tool"
        return "freigegeben"

    return Agent(
        llm=FunctionChatModel(reply),
        tools=[durable_tool(wait_for_release, idempotent=True)],
        sessions=slow_store,
        name="busy",
    )


@pytest.fixture
def client(
    serve: Callable[[Any], LiveServer], app: Any, slow_agent: Agent, authenticate: Any
) -> Callable[..., httpx.Client]:
    def open_client(**options: Any) -> httpx.Client:
        live = serve(app(session_routes(slow_agent, path=API, authenticate=authenticate, **options)))
        return httpx.Client(base_url=live.base_url, timeout=30)

    return open_client


def lines_of(response: httpx.Response) -> list[Any]:
    return [json.loads(raw)["chunk"] for raw in response.iter_lines() if raw]


def text(chunks: list[Any]) -> str:
    return "".join(c for c in chunks if isinstance(c, str))


def kinds(chunks: list[Any]) -> list[str]:
    return ["text" if isinstance(c, str) else c["kind"] for c in chunks]


def start_slow_turn(http: httpx.Client, sid: str) -> None:
    """Prompt ``slow`` and read its stream until the tool runs (the client then goes away; the turn goes on)."""
    with http.stream("POST", f"{API}/{sid}/prompt", json={"input": "slow work"}, headers=ALICE) as response:
        assert response.status_code == 200
        for raw in response.iter_lines():
            chunk = json.loads(raw)["chunk"] if raw else None
            if isinstance(chunk, dict) and chunk.get("kind") == "tool":
                return
    raise AssertionError("the slow turn never started its tool")


def humans(agent: Agent, sid: str) -> list[str]:
    return [m.text for m in agent.session(sid).history() if isinstance(m, HumanMessage)]


def test_a_busy_session_answers_409_to_reject_and_stores_nothing(
    client: Callable[..., httpx.Client], slow_agent: Agent, release: threading.Event
) -> None:
    with client() as http:
        sid = http.post(API, headers={**JSON, **ALICE}).json()["session_id"]
        start_slow_turn(http, sid)
        # The attack on "accepted means stored": a second tab sends while the turn runs, asking not to wait.
        busy = http.post(
            f"{API}/{sid}/prompt", json={"input": "noch da?", "message_id": "m-2", "on_busy": "reject"}, headers=ALICE
        )
        assert busy.status_code == 409 and busy.headers["content-type"] == "application/json"
        error = busy.json()
        assert error["kind"] == "error" and error["type"] == "SessionBusyError" and error["code"] == "SESSION_BUSY"
        assert sid in error["message"]
        bad = http.post(f"{API}/{sid}/prompt", json={"input": "x", "on_busy": "later"}, headers=ALICE)
        assert bad.status_code == 400 and bad.json()["type"] == "BadRequest" and "on_busy" in bad.json()["message"]
        release.set()
        rest = lines_of(http.get(f"{API}/{sid}/stream", params={"cursor": 0}, headers=ALICE))
        assert kinds(rest)[-1] == "turn_end" and rest[-1]["stop_reason"] == "end_turn"
        assert humans(slow_agent, sid) == ["slow work"]  # nothing of the refused prompt was stored
        # The same message id is new (nothing was stored under it); with no turn running, reject just runs.
        again = http.post(
            f"{API}/{sid}/prompt", json={"input": "noch da?", "message_id": "m-2", "on_busy": "reject"}, headers=ALICE
        )
        assert again.status_code == 200 and "Antwort auf 'noch da?'" in text(lines_of(again))


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_interrupt_and_rollback_over_http_cancel_the_running_turn_and_stream_the_new_one(
    client: Callable[..., httpx.Client], slow_agent: Agent, strategy: str
) -> None:
    with client() as http:
        sid = http.post(API, headers={**JSON, **ALICE}).json()["session_id"]
        start_slow_turn(http, sid)
        new = http.post(f"{API}/{sid}/prompt", json={"input": "lieber das", "on_busy": strategy}, headers=ALICE)
        assert new.status_code == 200
        chunks = lines_of(new)
        ends = [c for c in chunks if isinstance(c, dict) and c.get("kind") == "turn_end"]
        assert [e["stop_reason"] for e in ends] == ["cancelled", "end_turn"]  # the old turn, then the new one
        assert "Antwort auf 'lieber das'" in text(chunks)
        if strategy == "rollback":
            assert kinds(chunks).index("turn_rollback") > kinds(chunks).index("turn_end")
            assert humans(slow_agent, sid) == ["lieber das"]
        else:
            assert humans(slow_agent, sid) == ["slow work", "lieber das"]


def test_the_routes_on_busy_is_the_default_and_a_bad_one_is_refused(
    client: Callable[..., httpx.Client], slow_agent: Agent, release: threading.Event
) -> None:
    with pytest.raises(UserError, match="on_busy='later'"):
        session_routes(slow_agent, authenticate=lambda request: None, on_busy="later")  # type: ignore[arg-type]
    with client(on_busy="reject") as http:
        sid = http.post(API, headers={**JSON, **ALICE}).json()["session_id"]
        start_slow_turn(http, sid)
        refused = http.post(f"{API}/{sid}/prompt", json={"input": "und?"}, headers=ALICE)
        assert refused.status_code == 409 and refused.json()["code"] == "SESSION_BUSY"
        with ThreadPoolExecutor(1) as pool:  # the body's own strategy wins: it waits behind the running turn
            queued = pool.submit(
                http.post, f"{API}/{sid}/prompt", json={"input": "und?", "on_busy": "enqueue"}, headers=ALICE
            )
            store = slow_agent.sessions
            deadline = time.monotonic() + 30
            while len(store.open_turns(sid)) < 2:  # type: ignore[union-attr]
                assert time.monotonic() < deadline and not queued.done(), "the queued prompt was not stored"
                time.sleep(0.02)
            release.set()
            assert "Antwort auf 'und?'" in text(lines_of(queued.result(timeout=60)))
        assert humans(slow_agent, sid) == ["slow work", "und?"]


def test_an_image_prompt_over_http_reaches_the_model_server_as_image_content(
    serve: Callable[[Any], LiveServer],
    app: Any,
    authenticate: Any,
    aimock: Aimock,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("LOCAL_LLM_BASE_URL", aimock.openai_base_url)
    aimock.add({"match": {"userMessage": "Was ist das"}, "response": {"content": "Ein rotes Quadrat."}})
    store = sqlite_sessions(tmp_path / "images.sqlite")
    try:
        agent = Agent(llm=get_llm("local", "vision-1"), sessions=store, name="vision")
        live = serve(app(session_routes(agent, path=API, authenticate=authenticate, max_body_bytes=64_000)))
        image = base64.b64encode(RED).decode()
        with httpx.Client(base_url=live.base_url, timeout=60) as http:
            sid = http.post(API, headers={**JSON, **ALICE}).json()["session_id"]
            blocks = [
                {"type": "text", "text": "Was ist das?"},
                {"type": "image", "data": image, "mime_type": "image/png"},
            ]
            answered = http.post(f"{API}/{sid}/prompt", json={"input": blocks}, headers=ALICE)
            assert answered.status_code == 200 and "Ein rotes Quadrat." in text(lines_of(answered))
            # Refused before anything is stored: a non-canonical image, a non-image, blocks that are no objects.
            for bad, says in [
                ([{"type": "image", "data": image + "\n", "mime_type": "image/png"}], "canonical"),
                ([{"type": "image", "data": base64.b64encode(b"<html>").decode(), "mime_type": "image/png"}], "PNG"),
                (["Was ist das?"], "content blocks"),
                ([], "content blocks"),
            ]:
                refused = http.post(f"{API}/{sid}/prompt", json={"input": bad}, headers=ALICE)
                assert refused.status_code == 400 and says in refused.json()["message"], refused.text
            assert http.post(API + "/" + sid + "/prompt", json={"input": 7}, headers=ALICE).status_code == 400
        (body,) = [b for b in aimock.request_bodies() if "messages" in b]
        assert body["messages"][-1]["content"] == [
            {"type": "text", "text": "Was ist das?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + image}},
        ]
        stored = [m for m in agent.session(sid).history() if isinstance(m, HumanMessage)]
        assert len(stored) == 1  # the refused prompts left nothing
    finally:
        store.close()  # type: ignore[attr-defined]


def test_the_ai_sdk_and_ag_ui_clients_send_an_image_prompt_that_reaches_the_model_server(
    serve: Callable[[Any], LiveServer],
    app: Any,
    authenticate: Any,
    aimock: Aimock,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    node: Any,
) -> None:
    monkeypatch.setenv("LOCAL_LLM_BASE_URL", aimock.openai_base_url)
    aimock.add({"match": {"userMessage": "Was ist das (AI SDK)?"}, "response": {"content": "Rot, sagt das SDK."}})
    aimock.add({"match": {"userMessage": "Was ist das (AG-UI)?"}, "response": {"content": "Rot, sagt AG-UI."}})
    store = sqlite_sessions(tmp_path / "clients.sqlite")
    try:
        agent = Agent(llm=get_llm("local", "vision-1"), sessions=store, name="vision")
        routes = [
            session_routes(agent, path="/vercel-sessions", protocol="vercel-ai", authenticate=authenticate),
            session_routes(agent, path="/agui-sessions", protocol="ag-ui", authenticate=authenticate),
        ]
        live = serve(app(*routes))
        image = base64.b64encode(RED).decode()
        report = node("image_clients.mjs", {"base": live.base_url, "token": "alice-token", "png": image})
        assert report["vercel"]["error"] is None and report["vercel"]["text"] == "Rot, sagt das SDK."
        assert report["agui"]["ok"] and report["agui"]["text"] == "Rot, sagt AG-UI.", report["agui"]
        bodies = [b for b in aimock.request_bodies() if "messages" in b]
        assert [b["messages"][-1]["content"] for b in bodies] == [
            [
                {"type": "text", "text": f"Was ist das ({who})?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + image}},
            ]
            for who in ("AI SDK", "AG-UI")
        ]
    finally:
        store.close()  # type: ignore[attr-defined]
