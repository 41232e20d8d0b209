"""Every bad request gets the documented status and the §5 error object as JSON, over a real uvicorn server.

Never ``text/plain``, never a traceback, never the client's input echoed back; a failure that is not ours
carries a generic message and the ``error_id`` under which the server logged the details.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from _ui_samples import SECRET
from conftest import LiveServer

from ai_utils import agent_routes, session_routes

MARKER = "MARKER-5e1f"  # put into bad bodies: it must never come back
ALICE = {"authorization": "Bearer alice-token"}
BOB = {"authorization": "Bearer bob-token"}


@dataclass(frozen=True)
class Bad:
    name: str
    path: str
    status: int
    type: str
    body: bytes | None = None
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json", **ALICE})
    says: str = ""


def json_body(text: str) -> bytes:
    return text.encode()


NDJSON = [
    Bad("malformed JSON", "/agent", 400, "BadRequest", json_body(f'{{"input": "{MARKER}"'), says="not valid JSON"),
    Bad("a JSON list", "/agent", 400, "BadRequest", json_body(f'["{MARKER}"]'), says="not a JSON list"),
    Bad("a JSON string", "/agent", 400, "BadRequest", json_body(f'"{MARKER}"'), says="not a JSON str"),
    Bad("NaN is not JSON", "/agent", 400, "BadRequest", json_body('{"input": NaN}'), says="not valid JSON"),
    Bad("an empty body", "/agent", 400, "BadRequest", b"", says="empty"),
    Bad("input not a string", "/agent", 400, "BadRequest", json_body('{"input": 5}'), says="`input`"),
    Bad("decision of a wrong type", "/agent", 400, "BadRequest", json_body('{"decision": 5}'), says="`decision`"),
    Bad(
        "decisions of a wrong type",
        "/agent",
        400,
        "BadRequest",
        json_body('{"decisions": "approve"}'),
        says="`decisions`",
    ),
    Bad("thread_id not a string", "/agent", 400, "BadRequest", json_body('{"thread_id": 7}'), says="`thread_id`"),
    Bad(
        "thread_id with a newline",
        "/agent",
        400,
        "BadRequest",
        json_body(r'{"thread_id": "t-1\n"}'),
        says="`thread_id`",
    ),
    Bad("an unknown field", "/agent", 400, "BadRequest", json_body(f'{{"{MARKER}": 1}}'), says="Unknown field"),
    Bad(
        "nesting past the limit",
        "/agent",
        400,
        "BadRequest",
        json_body('{"context": ' + "[" * 200 + "]" * 200 + "}"),
        says="deeper than",
    ),
    Bad(
        "a form post",
        "/agent",
        415,
        "UnsupportedMediaType",
        b"input=hi",
        headers={"content-type": "application/x-www-form-urlencoded", **ALICE},
    ),
    Bad(
        "text/plain",
        "/agent",
        415,
        "UnsupportedMediaType",
        b'{"input": "hi"}',
        headers={"content-type": "text/plain", **ALICE},
    ),
    Bad("no content type", "/agent", 415, "UnsupportedMediaType", b'{"input": "hi"}', headers=dict(ALICE)),
    Bad("a body over max_body_bytes", "/small", 413, "PayloadTooLarge", json_body(f'{{"input": "{MARKER * 40}"}}')),
    Bad(
        "no credentials",
        "/agent",
        401,
        "Unauthorized",
        json_body('{"input": "hi"}'),
        headers={"content-type": "application/json"},
    ),
    Bad(
        "a wrong token",
        "/agent",
        401,
        "Unauthorized",
        json_body('{"input": "hi"}'),
        headers={"content-type": "application/json", "authorization": "Bearer nope"},
    ),
    Bad(
        "no authenticate= configured", "/open", 401, "Unauthorized", json_body('{"input": "hi"}'), says="authenticate="
    ),
    Bad("a GET", "/agent", 405, "MethodNotAllowed", method="GET", headers=dict(ALICE), says="use POST"),
    Bad("a GET without credentials", "/agent", 401, "Unauthorized", method="GET", headers={}),  # auth comes first
    Bad(
        "input and decision",
        "/agent",
        400,
        "UserError",
        json_body('{"input": "hi", "thread_id": "t-9", "decision": "approve"}'),
    ),
    Bad(
        "a decision with nothing pending",
        "/agent",
        400,
        "UserError",
        json_body('{"thread_id": "t-8", "decision": "approve"}'),
    ),
    Bad(
        "another actor's thread",
        "/agent",
        404,
        "NotFound",
        json_body('{"input": "hi", "thread_id": "alice-thread"}'),
        headers={"content-type": "application/json", **BOB},
    ),
    Bad("a model that fails at once", "/agent", 500, "RuntimeError", json_body('{"input": "crash"}'), says="error id"),
]

PROTOCOLS = [
    Bad(
        "AG-UI: not a RunAgentInput",
        "/agui",
        400,
        "BadRequest",
        json_body(f'{{"threadId": 1, "runId": "{MARKER}"}}'),
        says="RunAgentInput",
    ),
    Bad(
        "AG-UI: no user message",
        "/agui",
        400,
        "BadRequest",
        json_body('{"threadId": "t-1", "runId": "r", "messages": [{"id": "a", "role": "assistant", "content": "x"}]}'),
        says="last message",
    ),
    Bad(
        "AG-UI: an approval payload that is not a JSON true",
        "/agui",
        400,
        "BadRequest",
        json_body(
            '{"threadId": "t-1", "runId": "r", "messages": [], '
            '"resume": [{"interruptId": "i-1", "status": "resolved", "payload": {"approved": "yes"}}]}'
        ),
        says="approved",
    ),
    Bad(
        "AI SDK: a model that fails at once",
        "/vercel",
        500,
        "RuntimeError",
        json_body(
            '{"id": "c-1", "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "crash"}]}]}'
        ),
        says="error id",
    ),
    Bad(
        "AI SDK: no messages",
        "/vercel",
        400,
        "BadRequest",
        json_body('{"id": "c-1", "messages": []}'),
        says="`messages`",
    ),
    Bad(
        "AI SDK: a bad chat id",
        "/vercel",
        400,
        "BadRequest",
        json_body(f'{{"id": "{MARKER} x", "messages": []}}'),
        says="`id`",
    ),
    Bad(
        "AI SDK: regenerate",
        "/vercel",
        400,
        "BadRequest",
        json_body(
            '{"id": "c-1", "trigger": "regenerate-message", "messages": [{"id": "u", "role": "user", "parts": []}]}'
        ),
        says="submit-message",
    ),
]

SESSIONS = [
    Bad("an unknown session", "/sessions/nobody-1/prompt", 404, "NotFound", json_body('{"input": "hi"}')),
    Bad(
        "another actor's session",
        "/sessions/{alice}/prompt",
        404,
        "NotFound",
        json_body('{"input": "hi"}'),
        headers={"content-type": "application/json", **BOB},
    ),
    Bad(
        "another actor's stream", "/sessions/{alice}/stream?cursor=0", 404, "NotFound", method="GET", headers=dict(BOB)
    ),
    Bad(
        "another actor's steer",
        "/sessions/{alice}/steer",
        404,
        "NotFound",
        json_body('{"text": "x"}'),
        headers={"content-type": "application/json", **BOB},
    ),
    Bad(
        "another actor's cancel",
        "/sessions/{alice}/cancel",
        404,
        "NotFound",
        b"{}",
        headers={"content-type": "application/json", **BOB},
    ),
    Bad("a session made in code", "/sessions/made-in-code/stream", 404, "NotFound", method="GET", headers=dict(ALICE)),
    Bad(
        "a huge cursor",
        "/sessions/{alice}/stream?cursor=99999999999999999999",
        400,
        "BadRequest",
        method="GET",
        headers=dict(ALICE),
        says="cursor",
    ),
    Bad(
        "a negative cursor",
        "/sessions/{alice}/stream?cursor=-1",
        400,
        "BadRequest",
        method="GET",
        headers=dict(ALICE),
        says="cursor",
    ),
    Bad(
        "a cursor with a newline",
        "/sessions/{alice}/stream?cursor=1%0A",
        400,
        "BadRequest",
        method="GET",
        headers=dict(ALICE),
    ),
    Bad(
        "a cursor that is no number",
        f"/sessions/{{alice}}/stream?cursor={MARKER}",
        400,
        "BadRequest",
        method="GET",
        headers=dict(ALICE),
    ),
    Bad(
        "a negative cursor in the body",
        "/sessions/{alice}/prompt",
        400,
        "BadRequest",
        json_body('{"input": "hi", "cursor": -1}'),
    ),
    Bad(
        "a bad session id",
        "/sessions/a%20b/stream",
        400,
        "BadRequest",
        method="GET",
        headers=dict(ALICE),
        says="session id",
    ),
    Bad("creating with fields", "/sessions", 400, "BadRequest", json_body('{"session_id": "mine"}'), says="empty body"),
    Bad("a steer without text", "/sessions/{alice}/steer", 400, "BadRequest", json_body('{"text": ""}'), says="`text`"),
    Bad(
        "a decision with nothing waiting",
        "/sessions/{alice}/prompt",
        400,
        "UserError",
        json_body('{"decision": "approve"}'),
    ),
    Bad("a GET on prompt", "/sessions/{alice}/prompt", 405, "MethodNotAllowed", method="GET", headers=dict(ALICE)),
    Bad(
        "a GET on prompt without credentials", "/sessions/{alice}/prompt", 401, "Unauthorized", method="GET", headers={}
    ),
]


@pytest.fixture
def server(
    serve: Callable[[Any], LiveServer], app: Any, agent: Any, durable: Any, authenticate: Any
) -> Iterator[tuple[LiveServer, str]]:
    routes = [
        agent_routes(agent, authenticate=authenticate),
        agent_routes(agent, path="/open"),
        agent_routes(agent, path="/small", authenticate=authenticate, max_body_bytes=100),
        agent_routes(agent, path="/agui", protocol="ag-ui", authenticate=authenticate),
        agent_routes(agent, path="/vercel", protocol="vercel-ai", authenticate=authenticate),
        session_routes(durable, authenticate=authenticate),
    ]
    live = serve(app(*routes))
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        started = http.post("/agent", json={"input": "hi", "thread_id": "alice-thread"}, headers=ALICE)
        assert started.status_code == 200, started.text
        created = http.post("/sessions", content=b"", headers={"content-type": "application/json", **ALICE})
        assert created.status_code == 201, created.text
    durable.session("made-in-code").prompt("hi").result(timeout=30)
    yield live, created.json()["session_id"]


@pytest.mark.parametrize("bad", NDJSON + PROTOCOLS + SESSIONS, ids=lambda bad: bad.name)
def test_a_bad_request_gets_its_status_and_the_json_error_object(server: tuple[LiveServer, str], bad: Bad) -> None:
    live, alice_session = server
    url = live.base_url + bad.path.replace("{alice}", alice_session)

    response = httpx.request(bad.method, url, content=bad.body, headers=bad.headers, timeout=30)

    assert response.status_code == bad.status, response.text
    assert response.headers["content-type"] == "application/json"
    assert "x-vercel-ai-ui-message-stream" not in response.headers  # the body is no UI message stream
    error = response.json()
    assert set(error) <= {"kind", "type", "message", "error_id"}
    assert error["kind"] == "error" and error["type"] == bad.type and error["message"]
    assert bad.says in error["message"]
    assert "Traceback" not in response.text and 'File "' not in response.text
    assert MARKER not in response.text and SECRET not in response.text
    if bad.status == 500:
        assert error["error_id"] in error["message"]
    if bad.status == 405:
        assert response.headers["allow"] in ("POST", "GET")


def test_a_body_over_the_limit_is_refused_without_reading_it_all(server: tuple[LiveServer, str]) -> None:
    live, _ = server
    sent: list[int] = []

    def body() -> Iterator[bytes]:  # no Content-Length: the server must count what it reads
        for _ in range(1000):
            sent.append(1)
            yield b" " * 1024

    response = httpx.post(
        live.base_url + "/small", content=body(), headers={"content-type": "application/json", **ALICE}
    )
    assert response.status_code == 413 and response.json()["type"] == "PayloadTooLarge"
