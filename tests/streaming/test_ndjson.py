from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from ai_utils.client import iter_ndjson, parse_ndjson_line
from ai_utils.exceptions import ProviderError
from ai_utils.streaming import StreamResponse
from ai_utils.streaming._adapter import ChunkAdapter, aadapt, stream_kwargs
from ai_utils.streaming._decisions import to_resume


def app_for(make_chunks: Callable[[], Any], **response_kwargs: Any) -> Starlette:
    async def endpoint(request: Request) -> StreamResponse:
        return StreamResponse(make_chunks(), **response_kwargs)

    return Starlette(routes=[Route("/stream", endpoint)])


async def wait_for(event: threading.Event) -> None:
    while not event.is_set():  # polling keeps the wait cancellable
        await asyncio.sleep(0.005)


def test_lines_arrive_while_the_run_is_still_going(serve: Callable[..., Any]) -> None:
    go_on, finished = threading.Event(), threading.Event()

    async def chunks() -> AsyncIterator[Any]:
        yield "first "
        await wait_for(go_on)
        yield {"kind": "reasoning", "text": "second"}
        finished.set()

    server = serve(app_for(chunks))
    with httpx.Client(timeout=10) as client, client.stream("GET", f"{server.base_url}/stream") as response:
        lines = response.iter_lines()
        first = next(lines)
        assert not finished.is_set()  # the first line came before the run ended
        go_on.set()
        rest = list(lines)

    assert response.headers["content-type"] == "application/x-ndjson"
    assert parse_ndjson_line(first) == "first "
    assert list(iter_ndjson(rest)) == [{"kind": "reasoning", "text": "second"}]


def test_a_sync_stream_is_sent_line_by_line_too(serve: Callable[..., Any]) -> None:
    go_on, finished = threading.Event(), threading.Event()

    def chunks() -> Iterator[Any]:
        yield "first "
        assert go_on.wait(10)
        yield "second"
        finished.set()

    server = serve(app_for(chunks))
    with httpx.Client(timeout=10) as client, client.stream("GET", f"{server.base_url}/stream") as response:
        lines = response.iter_lines()
        assert parse_ndjson_line(next(lines)) == "first "
        assert not finished.is_set()
        go_on.set()
        assert list(iter_ndjson(lines)) == ["second"]


def test_an_exception_mid_stream_ends_the_body_with_an_error_line(serve: Callable[..., Any]) -> None:
    async def chunks() -> AsyncIterator[Any]:
        yield "partial "
        raise ProviderError("model backend unavailable", provider="openrouter")

    server = serve(app_for(chunks))
    response = httpx.get(f"{server.base_url}/stream", timeout=10)

    assert response.status_code == 200
    assert list(iter_ndjson(response.text.splitlines())) == [
        "partial ",
        {"kind": "error", "type": "ProviderError", "message": "model backend unavailable"},
    ]


def test_a_sync_stream_that_fails_ends_with_an_error_line(serve: Callable[..., Any]) -> None:
    def chunks() -> Iterator[Any]:
        yield "partial "
        raise RuntimeError("boom")

    server = serve(app_for(chunks))
    lines = list(iter_ndjson(httpx.get(f"{server.base_url}/stream", timeout=10).text.splitlines()))

    assert lines[-1]["type"] == "RuntimeError" and "boom" not in lines[-1]["message"]  # not ours: generic text
    assert lines[-1]["error_id"] in lines[-1]["message"]


def test_status_and_headers_can_be_set(serve: Callable[..., Any]) -> None:
    server = serve(app_for(lambda: iter(["x"]), status_code=201, headers={"X-Run": "r1"}))
    response = httpx.get(f"{server.base_url}/stream", timeout=10)

    assert (response.status_code, response.headers["x-run"], response.text) == (201, "r1", '"x"\n')
    assert response.headers["cache-control"] == "no-cache"


def _read_first_line_and_hang_up(server: Any) -> str:
    with httpx.Client(timeout=10) as client, client.stream("GET", f"{server.base_url}/stream") as response:
        return next(response.iter_lines())


def test_a_client_disconnect_stops_an_async_run(serve: Callable[..., Any]) -> None:
    stopped, produced = threading.Event(), []

    async def chunks() -> AsyncIterator[Any]:
        try:
            while True:
                produced.append(1)
                yield "tick "
                await asyncio.sleep(0.01)
        finally:
            stopped.set()

    server = serve(app_for(chunks))
    assert parse_ndjson_line(_read_first_line_and_hang_up(server)) == "tick "

    assert stopped.wait(5)
    count = len(produced)
    time.sleep(0.1)
    assert len(produced) == count  # nothing runs after the hang-up


def test_a_client_disconnect_stops_a_waiting_async_run(serve: Callable[..., Any]) -> None:
    stopped, never = threading.Event(), threading.Event()

    async def chunks() -> AsyncIterator[Any]:
        try:
            yield "first"
            await wait_for(never)
            yield "unreachable"
        finally:
            stopped.set()

    server = serve(app_for(chunks))
    _read_first_line_and_hang_up(server)

    assert stopped.wait(5)


def test_a_client_disconnect_stops_a_sync_run(serve: Callable[..., Any]) -> None:
    stopped = threading.Event()

    def chunks() -> Iterator[Any]:
        try:
            while True:
                yield "tick "
                time.sleep(0.01)
        finally:
            stopped.set()

    server = serve(app_for(chunks))
    _read_first_line_and_hang_up(server)

    assert stopped.wait(5)


def test_an_agent_run_and_its_resume_stream_over_http(
    serve: Callable[..., Any], make_graph: Callable[..., Any], outbox: Any
) -> None:
    graph = make_graph(
        [
            {"content": "Mailing bob.", "tool_calls": [{"name": "send_email", "args": {"to": "bob", "body": "hi"}}]},
            "Mail sent.",
        ],
        interrupt_on={"send_email": {"allowed_decisions": ["approve", "reject"], "description": "Send it?"}},
    )

    async def chat(request: Request) -> StreamResponse:
        body = await request.json()
        config = {"configurable": {"thread_id": body["thread_id"]}}
        if "decision" in body:
            inputs: Any = to_resume(body["decision"], pending=(await graph.aget_state(config)).interrupts)
        else:
            inputs = {"messages": [("user", body["message"])]}
        parts = graph.astream(inputs, config, **stream_kwargs())
        return StreamResponse(aadapt(parts, ChunkAdapter(show_tool_calls=True)))

    server = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])]))
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        first = list(iter_ndjson(client.post("/chat", json={"thread_id": "u1", "message": "mail bob"}).iter_lines()))
        second = list(iter_ndjson(client.post("/chat", json={"thread_id": "u1", "decision": "approve"}).iter_lines()))

    assert "".join(c for c in first if isinstance(c, str)) == "Mailing bob."
    assert first[-1]["kind"] == "interrupt" and first[-1]["question"] == "Send it?"
    events = [c for c in second if isinstance(c, dict)]
    assert [(e["phase"], e["output"]) for e in events] == [("end", "sent to bob")]  # start was shown before
    assert "".join(c for c in second if isinstance(c, str)) == "Mail sent."
    assert outbox.sent == [{"to": "bob", "body": "hi"}]


def test_a_client_disconnect_cancels_the_running_agent_tool(serve: Callable[..., Any]) -> None:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from ai_utils.testing import FakeChatModel

    started, cancelled, finished = threading.Event(), threading.Event(), threading.Event()

    @tool
    async def crunch(n: int) -> str:
        """Work for a long time."""
        started.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        finished.set()
        return "done"

    graph = create_agent(
        FakeChatModel(
            [
                {"content": "Crunching.", "tool_calls": [{"name": "crunch", "args": {"n": 1}, "id": "call_1_0"}]},
                "Never.",
            ]
        ),
        tools=[crunch],
    )

    async def run(request: Request) -> StreamResponse:
        parts = graph.astream({"messages": [("user", "go")]}, **stream_kwargs())
        return StreamResponse(aadapt(parts, ChunkAdapter(show_tool_calls=True)))

    server = serve(Starlette(routes=[Route("/stream", run)]))
    with httpx.Client(timeout=10) as client, client.stream("GET", f"{server.base_url}/stream") as response:
        for line in response.iter_lines():
            if parse_ndjson_line(line) == {
                "kind": "tool",
                "phase": "start",
                "tool_name": "crunch",
                "id": "call_1_0",
                "args": {"n": 1},
            }:
                break
        assert started.wait(5)

    assert cancelled.wait(5)
    assert not finished.is_set()


def test_a_sync_stream_keeps_its_context_variables_from_chunk_to_chunk(serve: Callable[..., Any]) -> None:
    import contextvars

    run_id: contextvars.ContextVar[str] = contextvars.ContextVar("run_id", default="unset")

    def chunks() -> Iterator[Any]:
        run_id.set("r-42")
        yield "set "
        yield run_id.get()

    server = serve(app_for(chunks))

    assert list(iter_ndjson(httpx.get(f"{server.base_url}/stream", timeout=10).text.splitlines())) == ["set ", "r-42"]
