"""The LangGraph Server API (SPEC §21): a turn through ``langgraph-sdk``'s ``runs.stream`` vs the same turn through
``session_routes`` NDJSON.

One uvicorn server process on 127.0.0.1 serves both over one SQLite session store, with the same zero-latency model
and tool (a ``calc`` prompt: one ``add`` call, then the answer): ``langgraph_api_routes({"lg": agent})`` and
``session_routes(agent2, path="/sessions")``. The client (this process) creates a fresh thread / session before
each sample (untimed), then times one turn: the SDK's async ``runs.stream(..., stream_mode="messages-tuple")``
read to its ``end`` vs an httpx stream of ``POST /sessions/{id}/prompt`` read to its ``turn_end`` line. Time to
the first event and total time.

Run as ``python benchmarks/bench_langgraph.py serve PORT DB`` to start the server alone.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _fixtures import TOOL_PROMPT, free_port, scripted_model, start_service
from _harness import Metric, Session

KEY = {"x-api-key": "bench"}
INPUT = {"messages": [{"role": "user", "content": TOOL_PROMPT}]}


def make_app(db: str) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request

    from ai_utils import Actor, Agent, langgraph_api_routes, session_routes, sqlite_sessions

    store = sqlite_sessions(Path(db), lease_seconds=30)
    lg_agent = Agent(llm=scripted_model(), tools=[_add()], sessions=store, name="lg")
    sr_agent = Agent(llm=scripted_model(), tools=[_add()], sessions=store, name="sr")

    def authenticate(request: Request) -> Actor | None:
        return Actor(user_id="bench") if request.headers.get("x-api-key") == "bench" else None

    routes = [
        *langgraph_api_routes({"lg": lg_agent}, sessions=store, authenticate=authenticate),
        *session_routes(sr_agent, path="/sessions", authenticate=authenticate),
    ]
    return Starlette(routes=routes)


def _add() -> Any:
    from ai_utils import durable_tool

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return durable_tool(add, idempotent=True)


_base: list[str] = []


def _server() -> str:
    if not _base:
        port = free_port()
        db = str(Path(tempfile.mkdtemp(prefix="bench-langgraph-")) / "threads.sqlite")
        start_service(
            [sys.executable, __file__, "serve", str(port), db], ready_url=f"http://127.0.0.1:{port}/ready", timeout=180
        )
        _base.append(f"http://127.0.0.1:{port}")
    return _base[0]


class Clients:
    """The SDK client and an httpx client, made in the harness's event loop; a fresh thread / session per sample."""

    def __init__(self) -> None:
        self.sdk: Any = None
        self.http: httpx.AsyncClient | None = None
        self.thread_id = ""
        self.session_id = ""

    def fresh(self) -> None:
        """Forget the clients: each metric runs in its own event loop, and clients belong to theirs."""
        self.sdk = self.http = None

    def _ready(self) -> tuple[Any, httpx.AsyncClient]:
        if self.sdk is None or self.http is None:
            from langgraph_sdk import get_client

            self.sdk = get_client(url=_server(), api_key="bench")
            self.http = httpx.AsyncClient(base_url=_server(), headers=KEY, timeout=60)
        return self.sdk, self.http

    async def new_thread(self) -> None:
        sdk, _ = self._ready()
        self.thread_id = (await sdk.threads.create())["thread_id"]

    async def new_session(self) -> None:
        _, http = self._ready()
        created = await http.post("/sessions", content=b"{}", headers={"content-type": "application/json"})
        self.session_id = created.raise_for_status().json()["session_id"]

    async def sdk_turn(self) -> float:
        """One turn through the SDK; the time to its first event (the total is timed by the harness)."""
        sdk, _ = self._ready()
        start = time.perf_counter()
        first = 0.0
        events = []
        async for part in sdk.runs.stream(self.thread_id, "lg", input=INPUT, stream_mode="messages-tuple"):
            if not events:
                first = time.perf_counter() - start
            events.append(part.event)
        assert events[0] == "metadata" and events[-1] == "end", events
        return first

    async def ndjson_turn(self) -> float:
        """One turn through ``session_routes`` NDJSON; the time to its first line."""
        _, http = self._ready()
        start = time.perf_counter()
        first = 0.0
        lines = []
        async with http.stream("POST", f"/sessions/{self.session_id}/prompt", json={"input": TOOL_PROMPT}) as reply:
            reply.raise_for_status()
            async for line in reply.aiter_lines():
                if line:
                    if not lines:
                        first = time.perf_counter() - start
                    lines.append(line)
        assert '"turn_end"' in lines[-1], lines[-1]
        return first


def metrics() -> list[Metric]:
    clients = Clients()

    def first_event(session: Session) -> tuple[float, float]:
        clients.fresh()
        m = session.medians(
            {"sdk": clients.sdk_turn, "ndjson": clients.ndjson_turn},
            {"sdk": clients.new_thread, "ndjson": clients.new_session},
            self_timed=True,
        )
        return m["sdk"] * 1e3, m["ndjson"] * 1e3

    def total(session: Session) -> tuple[float, float]:
        clients.fresh()
        m = session.medians(
            {"sdk": clients.sdk_turn, "ndjson": clients.ndjson_turn},
            {"sdk": clients.new_thread, "ndjson": clients.new_session},
        )
        return m["sdk"] * 1e3, m["ndjson"] * 1e3

    note = (
        "uvicorn on 127.0.0.1 (own process), one SQLite session store; a calc turn (one tool call); a fresh "
        "thread / session per sample (untimed); the SDK streams messages-tuple."
    )
    return [
        Metric(
            "LangGraph API: runs.stream (langgraph-sdk) / session_routes NDJSON, time to first event",
            measure=first_event,
            target=1.30,
            unit="ms",
            rounds=20,
            note=note,
        ),
        Metric(
            "LangGraph API: runs.stream (langgraph-sdk) / session_routes NDJSON, whole turn",
            measure=total,
            target=1.30,
            unit="ms",
            rounds=20,
            note=note,
        ),
    ]


if __name__ == "__main__" and sys.argv[1:2] == ["serve"]:
    import uvicorn
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    app = make_app(sys.argv[3])
    app.router.routes.append(Route("/ready", lambda request: PlainTextResponse("ok")))
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False)
