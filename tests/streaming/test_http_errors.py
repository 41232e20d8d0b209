"""HTTP errors have one shape, over a real uvicorn server and httpx.

Before the first line: a real status (400 for a `UserError`, 500 otherwise) and the error object as JSON.
After it: the stream's last line. Errors that are not ai_utils' own carry a generic text and an error id
that is logged with the full text; a tool that raises `SystemExit` ends only its run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from conftest import LiveServer
from langgraph.checkpoint.memory import InMemorySaver
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from ai_utils import Agent, StreamResponse
from ai_utils.client import is_error_event, is_tool_event, iter_ndjson
from ai_utils.testing import FakeChatModel, FunctionChatModel

SECRET = "SELECT * FROM users WHERE password='hunter2'"


def lookup(n: int) -> str:
    """Look a number up."""
    if n == 13:
        raise RuntimeError(SECRET)
    if n == 99:
        raise SystemExit(3)
    return f"number {n}"


def tool_calling_model(n: int) -> FakeChatModel:
    return FakeChatModel([{"content": "Looking. ", "tool_calls": [{"name": "lookup", "args": {"n": n}}]}, "Done."])


def app(make_agent: Callable[[], Agent], *, sync: bool = False, **response: Any) -> Starlette:
    async def chat(request: Request) -> StreamResponse:
        body = await request.json()
        agent = make_agent()
        call = agent.stream if sync else agent.astream
        chunks = call(
            body.get("input"), thread_id=body.get("thread_id"), decision=body.get("decision"), show_tool_calls=True
        )
        return StreamResponse(chunks, **response)

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def post(server: LiveServer, **body: Any) -> httpx.Response:
    return httpx.post(f"{server.base_url}/chat", json=body, timeout=20)


@pytest.mark.parametrize("sync", [False, True])
def test_a_bad_call_is_a_400_json_body_before_any_line(
    serve: Callable[[Any], LiveServer], caplog: pytest.LogCaptureFixture, sync: bool
) -> None:
    saver = InMemorySaver()
    server = serve(app(lambda: Agent(llm=FakeChatModel(["hi"]), checkpointer=saver), sync=sync))
    with caplog.at_level(logging.WARNING, logger="ai_utils.streaming"):
        both = post(server, input="hello", thread_id="t", decision="approve")
        no_thread = post(server, input="hello")

    for response in (both, no_thread):
        assert response.status_code == 400
        assert response.headers["content-type"] == "application/json"
        error = response.json()  # a client parsing JSON gets the same object as an error line
        assert error["kind"] == "error" and error["type"] == "UserError"
    assert "not both" in both.json()["message"]
    assert "thread_id" in no_thread.json()["message"]
    refused = [r for r in caplog.records if r.name == "ai_utils.streaming"]
    assert refused and all(r.levelno == logging.WARNING and r.exc_info is None for r in refused)


def test_a_foreign_error_before_the_first_line_is_a_500_with_the_same_shape(
    serve: Callable[[Any], LiveServer],
) -> None:
    def broken(messages: Any, tools: Any) -> str:
        raise OSError(f"disk /srv/secret failed: {SECRET}")

    server = serve(app(lambda: Agent(llm=FunctionChatModel(broken))))
    response = post(server, input="hello")

    assert response.status_code == 500
    error = response.json()
    assert (error["kind"], error["type"]) == ("error", "OSError")
    assert SECRET not in response.text and "error_id" in error


def test_after_the_first_line_errors_are_the_last_line_with_a_logged_id(
    serve: Callable[[Any], LiveServer], caplog: pytest.LogCaptureFixture
) -> None:
    # tool_errors="raise": the tool's error ends the run mid-stream (by default it would go to the model).
    server = serve(app(lambda: Agent(llm=tool_calling_model(13), tools=[lookup], tool_errors="raise")))
    with caplog.at_level(logging.ERROR, logger="ai_utils.streaming"):
        response = post(server, input="look up 13")

    assert response.status_code == 200
    chunks = list(iter_ndjson(response.text.splitlines()))
    assert chunks[0] == "Looking. "
    last = chunks[-1]
    assert is_error_event(last) and last["type"] == "RuntimeError"
    assert SECRET not in response.text
    logged = [r for r in caplog.records if last["error_id"] in r.getMessage()]
    assert logged and SECRET in logging.Formatter().formatException(logged[0].exc_info)  # type: ignore[arg-type]

    exposed = serve(
        app(lambda: Agent(llm=tool_calling_model(13), tools=[lookup], tool_errors="raise"), expose_errors=True)
    )
    assert SECRET in list(iter_ndjson(post(exposed, input="look up 13").text.splitlines()))[-1]["message"]


def test_on_error_chooses_the_error_line(serve: Callable[[Any], LiveServer]) -> None:
    def mine(exc: BaseException, event: Any) -> Any:
        return {**event, "message": "Etwas ging schief."}

    server = serve(app(lambda: Agent(llm=tool_calling_model(13), tools=[lookup], tool_errors="raise"), on_error=mine))
    last = list(iter_ndjson(post(server, input="x").text.splitlines()))[-1]
    assert last["message"] == "Etwas ging schief."


@pytest.mark.parametrize("sync", [False, True])
def test_a_tool_raising_system_exit_ends_its_run_not_the_server(serve: Callable[[Any], LiveServer], sync: bool) -> None:
    server = serve(app(lambda: Agent(llm=tool_calling_model(99), tools=[lookup]), sync=sync))
    chunks = list(iter_ndjson(post(server, input="look up 99").text.splitlines()))
    assert is_error_event(chunks[-1])

    # the server is still there and serves the next run
    server_ok = post(server, input="again")
    assert server_ok.status_code == 200


def test_an_integer_beyond_64_bits_does_not_end_the_stream(serve: Callable[[Any], LiveServer]) -> None:
    big = 2**70 + 1
    server = serve(app(lambda: Agent(llm=tool_calling_model(big), tools=[lookup])))
    response = post(server, input="look up a big one")

    chunks = list(iter_ndjson(response.text.splitlines()))
    start = next(c for c in chunks if is_tool_event(c) and c["phase"] == "start")
    assert start["args"] == {"n": big}
    assert chunks[-1] == "Done."
    assert json.loads(response.text.splitlines()[0]) == "Looking. "


def test_fastapi_route_gets_the_same_shapes(serve: Callable[[Any], LiveServer]) -> None:
    from fastapi import FastAPI

    saver = InMemorySaver()
    agent = Agent(llm=FakeChatModel(["Hallo!"]), checkpointer=saver)
    api = FastAPI()

    @api.post("/chat")
    async def chat(body: dict[str, Any]) -> StreamResponse:
        return StreamResponse(agent.astream(body.get("input"), thread_id=body.get("thread_id")))

    server = serve(api)
    refused = post(server, input="hi")
    assert (refused.status_code, refused.json()["type"]) == (400, "UserError")
    ok = post(server, input="hi", thread_id="t")
    assert (ok.status_code, list(iter_ndjson(ok.text.splitlines()))) == (200, ["Hallo!"])


def test_a_subagent_tool_raising_system_exit_ends_the_run_not_the_server(serve: Callable[[Any], LiveServer]) -> None:
    """deepagents builds its subagents without our middleware; the tools they get are guarded copies."""
    from ai_utils import DeepAgent

    def make() -> Any:
        llm = FakeChatModel(
            [
                {
                    "tool_calls": [
                        {"name": "task", "args": {"description": "look 99", "subagent_type": "general-purpose"}}
                    ]
                },
                {"tool_calls": [{"name": "lookup", "args": {"n": 99}}]},
            ]
        )
        return DeepAgent(llm=llm, tools=[lookup])

    server = serve(app(make))
    last = list(iter_ndjson(post(server, input="delegate", thread_id="d1").text.splitlines()))[-1]
    assert is_error_event(last) and last["type"] == "ToolAbortedError"
    assert post(server, input="again", thread_id="d2").status_code == 200
