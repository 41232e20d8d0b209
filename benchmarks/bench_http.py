"""HTTP NDJSON endpoint (performance.md metric 6): our `StreamResponse` route vs a plain Starlette route.

One uvicorn server process on 127.0.0.1 serves the routes with the same zero-latency model and tool:
``/ours`` returns ``StreamResponse(agent.astream(...))``; ``/anchor`` is a hand-written ``StreamingResponse``
over ``create_agent(...).astream(stream_mode="messages")`` sending each text as an orjson line; ``/routes`` is
``agent_routes(agent)`` (authenticate, bounded JSON body, checks, the same `StreamResponse`), compared with
``/ours``. The client (this process, httpx.AsyncClient) reads every line. Lines/s at c=10; time to first line
p95 at c=100.

Run as ``python benchmarks/bench_http.py serve PORT`` to start the server alone.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from _fixtures import (
    LONG_REPLY,
    PLAIN_PROMPT,
    SHORT_PROMPT,
    SHORT_REPLY,
    add,
    forget_calls,
    free_port,
    scripted_model,
    start_service,
)
from _harness import Metric, Session

LINES = 200
THROUGHPUT_CONCURRENCY = 10
LATENCY_CONCURRENCY = 100
SHORT_LINES = len(SHORT_REPLY.split())


def make_app() -> Any:
    import orjson
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from ai_utils import Actor, Agent, StreamResponse, agent_routes

    ours_model = scripted_model(LONG_REPLY)
    anchor_model = scripted_model(LONG_REPLY)
    routes_model = scripted_model(LONG_REPLY)
    agent = Agent(llm=ours_model, tools=[add])
    routes_agent = Agent(llm=routes_model, tools=[add])
    graph = create_agent(anchor_model, [add])

    def authenticate(request: Request) -> Actor:
        forget_calls(routes_model)  # once per request, as the other routes do
        return Actor(user_id="bench")

    async def ours(request: Request) -> StreamResponse:
        body = await request.json()
        forget_calls(ours_model)
        return StreamResponse(agent.astream(body["input"]))

    async def anchor(request: Request) -> StreamingResponse:
        body = await request.json()
        forget_calls(anchor_model)

        async def lines() -> AsyncIterator[bytes]:
            async for message, _meta in graph.astream(
                {"messages": [HumanMessage(body["input"])]}, stream_mode="messages"
            ):
                if text := message.text:
                    yield orjson.dumps(text, option=orjson.OPT_APPEND_NEWLINE)

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    routes = [Route("/ours", ours, methods=["POST"]), Route("/anchor", anchor, methods=["POST"])]
    return Starlette(routes=[*routes, *agent_routes(routes_agent, path="/routes", authenticate=authenticate)])


_base: list[str] = []


def _server() -> str:
    if not _base:
        port = free_port()
        start_service([sys.executable, __file__, "serve", str(port)], ready_url=f"http://127.0.0.1:{port}/ready")
        _base.append(f"http://127.0.0.1:{port}")
    return _base[0]


async def _one(client: httpx.AsyncClient, url: str, prompt: str) -> tuple[float, int]:
    """Time to the first line and the number of lines of one request."""
    start = time.perf_counter()
    first = 0.0
    count = 0
    async with client.stream("POST", url, json={"input": prompt}) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line:
                if not count:
                    first = time.perf_counter() - start
                count += 1
    return first, count


def metrics() -> list[Metric]:
    clients: dict[str, httpx.AsyncClient] = {}

    def client() -> httpx.AsyncClient:
        # Created inside the harness's event loop, reused by every sample of the metric.
        if "c" not in clients:
            limits = httpx.Limits(max_connections=LATENCY_CONCURRENCY + 10, max_keepalive_connections=200)
            clients["c"] = httpx.AsyncClient(limits=limits, timeout=60)
        return clients["c"]

    def batch(route: str, concurrency: int, prompt: str = PLAIN_PROMPT, lines: int = LINES) -> Any:
        async def sample() -> list[tuple[float, int]]:
            url = f"{_server()}/{route}"
            results = await asyncio.gather(*(_one(client(), url, prompt) for _ in range(concurrency)))
            assert all(count == lines for _, count in results), results[:3]
            return results

        return sample

    def throughput(session: Session) -> tuple[float, float]:
        _server()
        clients.clear()
        m = session.medians(
            {"ours": batch("ours", THROUGHPUT_CONCURRENCY), "anchor": batch("anchor", THROUGHPUT_CONCURRENCY)}
        )
        total = LINES * THROUGHPUT_CONCURRENCY
        return total / m["ours"], total / m["anchor"]

    def routes_throughput(session: Session) -> tuple[float, float]:
        _server()
        clients.clear()
        m = session.medians(
            {"routes": batch("routes", THROUGHPUT_CONCURRENCY), "ours": batch("ours", THROUGHPUT_CONCURRENCY)}
        )
        total = LINES * THROUGHPUT_CONCURRENCY
        return total / m["routes"], total / m["ours"]

    def p95_of(route: str) -> Any:
        run = batch(route, LATENCY_CONCURRENCY, SHORT_PROMPT, SHORT_LINES)

        async def sample() -> float:
            firsts = sorted(first for first, _ in await run())
            return firsts[int(0.95 * (len(firsts) - 1))]

        return sample

    def latency(session: Session) -> tuple[float, float]:
        _server()
        clients.clear()
        m = session.medians({"ours": p95_of("ours"), "anchor": p95_of("anchor")}, warmup=1, self_timed=True)
        return m["ours"] * 1e3, m["anchor"] * 1e3

    return [
        Metric(
            f"HTTP lines/s at c={THROUGHPUT_CONCURRENCY}: StreamResponse(agent.astream) / Starlette messages route",
            measure=throughput,
            target=0.90,
            direction="min",
            unit="lines/s",
            note=f"uvicorn on 127.0.0.1 (own process), httpx.AsyncClient; {LINES} lines per response.",
        ),
        Metric(
            f"HTTP lines/s at c={THROUGHPUT_CONCURRENCY}: agent_routes NDJSON / StreamResponse(agent.astream) route",
            measure=routes_throughput,
            target=0.95,
            direction="min",
            unit="lines/s",
            note=f"the same server; agent_routes adds authenticate, the bounded JSON body read, its checks and "
            f"show_tool_calls; {LINES} lines per response.",
        ),
        Metric(
            f"HTTP time to first line p95 at c={LATENCY_CONCURRENCY}: ours / Starlette messages route",
            measure=latency,
            target=1.20,
            unit="ms",
            rounds=6,
            note=f"p95 over {LATENCY_CONCURRENCY} concurrent requests ({SHORT_LINES}-line answers) per sample, median "
            "over 6 samples per repeat; on a loaded 2-core box this ratio swings widely between runs.",
        ),
    ]


if __name__ == "__main__" and sys.argv[1:2] == ["serve"]:
    import uvicorn
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    app = make_app()
    app.router.routes.append(Route("/ready", lambda request: PlainTextResponse("ok")))
    # Keep-alive longer than a metric: uvicorn's 5 s default closes idle pooled connections between rounds, and a
    # request racing that close fails with a ReadError (a client-pool artefact, not what the rows measure).
    uvicorn.run(
        app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False, timeout_keep_alive=600
    )
