"""`agent_routes` over real HTTP (uvicorn + httpx), NDJSON: a turn with an approval and its resume, who owns a
thread, the run context from the server, async ``authenticate``, FastAPI mounting, and bad options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from conftest import LiveServer
from fastapi import FastAPI
from langchain.tools import ToolRuntime
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from starlette.requests import Request

from ai_utils import Actor, Agent, UserError, agent_routes, session_routes
from ai_utils.client import is_interrupt, is_tool_event, iter_ndjson
from ai_utils.testing import FakeChatModel

ALICE = {"authorization": "Bearer alice-token"}
BOB = {"authorization": "Bearer bob-token"}


def post(server: LiveServer, path: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    return httpx.post(server.base_url + path, json=body, headers=headers, timeout=30)


def test_a_turn_waits_for_approval_and_resumes_on_the_same_thread(
    serve: Callable[[Any], LiveServer], app: Any, agent: Agent, authenticate: Any, outbox: Any
) -> None:
    server = serve(app(agent_routes(agent, authenticate=authenticate)))

    first = post(server, "/agent", {"input": "mail Anna"}, ALICE)
    assert first.status_code == 200 and first.headers["content-type"] == "application/x-ndjson"
    thread_id = first.headers["x-thread-id"]  # a new thread when the body names none
    chunks = list(iter_ndjson(first.iter_lines()))
    assert chunks[0] == "Ich " and is_tool_event(chunks[-2]) and is_interrupt(chunks[-1])
    assert chunks[-1]["question"] == "Send this mail?" and outbox.sent == []

    second = post(server, "/agent", {"thread_id": thread_id, "decision": "approve"}, ALICE)
    resumed = list(iter_ndjson(second.iter_lines()))
    assert resumed[0] == {
        "kind": "tool",
        "phase": "end",
        "tool_name": "send_mail",
        "id": chunks[-2]["id"],
        "output": "Mail an anna@example.com verschickt.",
        "status": "success",
    }
    assert "".join(c for c in resumed if isinstance(c, str)) == "Erledigt."
    assert outbox.sent == [{"to": "anna@example.com", "subject": "Termin"}]
    assert agent.get_state(thread_id).metadata["ai_utils_owner"] == '[null, "alice"]'


def test_a_thread_belongs_to_the_actor_whose_requests_wrote_it(
    serve: Callable[[Any], LiveServer], app: Any, agent: Agent, authenticate: Any
) -> None:
    server = serve(app(agent_routes(agent, authenticate=authenticate)))
    assert post(server, "/agent", {"input": "mail Anna", "thread_id": "t-alice"}, ALICE).status_code == 200
    agent.invoke("hallo", thread_id="t-code")  # written in code: no HTTP actor owns it

    for thread in ("t-alice", "t-code"):
        refused = post(server, "/agent", {"thread_id": thread, "decision": "approve"}, BOB)
        assert refused.status_code == 404 and refused.json()["type"] == "NotFound"
    assert agent.pending("t-alice") is not None  # bob's request changed nothing
    assert post(server, "/agent", {"input": "hallo", "thread_id": "t-bob"}, BOB).status_code == 200
    assert post(server, "/agent", {"thread_id": "t-alice", "decision": "approve"}, ALICE).status_code == 200


@dataclass
class Ctx:
    user: str
    api_token: str


def context_agent(seen: list[Any]) -> Agent:
    @tool
    def whoami(runtime: ToolRuntime[Ctx]) -> str:
        """Tell who is asking."""
        seen.append(runtime.context)
        return "ok"

    llm = FakeChatModel([{"tool_calls": [{"name": "whoami", "args": {}}]}, "done"], cycle=True)
    return Agent(llm=llm, tools=[whoami], checkpointer=InMemorySaver(), context_schema=Ctx)


def test_the_run_context_comes_from_the_server_hook_and_a_client_cannot_set_it(
    serve: Callable[[Any], LiveServer], app: Any
) -> None:
    seen: list[Any] = []

    async def check_token(request: Request) -> Actor | None:  # authenticate may be async
        return Actor(user_id="alice") if request.headers.get("authorization") == "Bearer alice-token" else None

    def context(request: Request, actor: Actor) -> Ctx:
        return Ctx(user=str(actor.user_id), api_token="server-side-token")

    server = serve(app(agent_routes(context_agent(seen), authenticate=check_token, context=context)))

    assert post(server, "/agent", {"input": "who?"}, ALICE).status_code == 200
    assert seen == [Ctx(user="alice", api_token="server-side-token")]
    forged = post(server, "/agent", {"input": "who?", "context": {"user": "admin", "api_token": "x"}}, ALICE)
    assert forged.status_code == 400 and "context" in forged.json()["message"]
    assert len(seen) == 1


def test_without_a_hook_the_body_context_reaches_the_tools(
    serve: Callable[[Any], LiveServer], app: Any, authenticate: Any
) -> None:
    seen: list[Any] = []
    server = serve(app(agent_routes(context_agent(seen), authenticate=authenticate)))
    response = post(server, "/agent", {"input": "who?", "context": {"user": "alice", "api_token": "t-1"}}, ALICE)
    assert response.status_code == 200, response.text
    list(response.iter_lines())
    assert seen == [Ctx(user="alice", api_token="t-1")]


def test_reasoning_is_streamed_when_asked(
    serve: Callable[[Any], LiveServer], app: Any, agent: Agent, authenticate: Any
) -> None:
    server = serve(app(agent_routes(agent, authenticate=authenticate, show_reasoning=True)))
    chunks = list(iter_ndjson(post(server, "/agent", {"input": "hallo"}, ALICE).iter_lines()))
    assert "".join(c["text"] for c in chunks if isinstance(c, dict) and c["kind"] == "reasoning") == "Ein Gruss."
    assert "".join(c for c in chunks if isinstance(c, str)) == "Hallo Welt."


def test_the_routes_mount_in_fastapi_and_keep_their_json_errors(
    serve: Callable[[Any], LiveServer], agent: Agent, durable: Agent, authenticate: Any
) -> None:
    api = FastAPI(routes=agent_routes(agent, authenticate=authenticate))
    api.router.routes.extend(session_routes(durable, authenticate=authenticate))
    server = serve(api)

    chunks = list(iter_ndjson(post(server, "/agent", {"input": "hallo"}, ALICE).iter_lines()))
    assert "".join(c for c in chunks if isinstance(c, str)) == "Hallo Welt."
    bad = httpx.post(
        server.base_url + "/agent", content=b"[1, 2]", headers={"content-type": "application/json", **ALICE}
    )
    assert bad.status_code == 400 and bad.json()["kind"] == "error"  # ours, not FastAPI's 422 {"detail": ...}
    created = httpx.post(server.base_url + "/sessions", headers={"content-type": "application/json", **ALICE})
    assert created.status_code == 201


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"protocol": "sse"}, "protocol"),
        ({"path": "agent"}, "path"),
        ({"path": "/a/{id}"}, "path"),
        ({"max_body_bytes": 0}, "max_body_bytes"),
        ({"max_body_bytes": True}, "max_body_bytes"),
        ({"authenticate": "token"}, "authenticate"),
        ({"context": {"user": "x"}}, "context"),
    ],
)
def test_bad_options_are_a_user_error(agent: Agent, options: dict[str, Any], says: str) -> None:
    with pytest.raises(UserError, match=says):
        agent_routes(agent, **options)


def test_session_routes_need_an_agent_with_sessions(agent: Agent) -> None:
    with pytest.raises(UserError, match="sessions="):
        session_routes(agent)
