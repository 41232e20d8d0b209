"""A chat endpoint whose answers survive the server: durable sessions (SPEC §14) behind two routes.

`POST /chat` with ``{"session_id", "text", "message_id"?, "cursor"?}`` stores the prompt (a retry with the
same ``message_id`` runs nothing new) and streams the session's log after ``cursor`` as NDJSON lines
``{"cursor": n, "chunk": ...}``. `GET /chat/stream?session_id=...&cursor=n` is the reconnect route: it
replays every line after ``n`` and follows the live turn. Kill the server mid-answer, start it again on the
same SQLite file, and the page (`static/durable.html`) reconnects with its last cursor: the turn
continues where it stopped and every line arrives exactly once. FastAPI works the same (`StreamResponse`
is a Starlette response).

Runs offline with a scripted model; with OPENROUTER_API_KEY set it uses the real provider (`get_llm()`).

    .venv/bin/python examples/durable_chat.py --port 8000 --db chat.sqlite   # then open http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, ToolMessage
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ai_utils import Agent, StreamResponse, UserError, durable_tool, get_llm, sqlite_sessions
from ai_utils.testing import FunctionChatModel

PAGE = Path(__file__).parent / "static" / "durable.html"
ANSWER = [f"Zeile {i}: Die Frühschicht beginnt um {5 + i} Uhr." for i in range(1, 6)]


def search_schedule(query: str) -> str:
    """Search the shift schedule (slow: it takes DURABLE_CHAT_TOOL_SECONDS, default 1.5 s).

    Args:
        query: what to look up.
    """
    time.sleep(float(os.environ.get("DURABLE_CHAT_TOOL_SECONDS", "1.5")))
    return "Frühschicht 6-14 Uhr, Spätschicht 14-22 Uhr."


def pick_model() -> BaseChatModel:
    """The real provider when OPENROUTER_API_KEY is set, else a scripted model."""
    if os.environ.get("OPENROUTER_API_KEY"):
        return get_llm()

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        if isinstance(messages[-1], ToolMessage) or "[system note]" in str(messages[-1].content):
            return "\n".join(ANSWER)
        return {
            "content": "Ich sehe im Schichtplan nach.\n",
            "tool_calls": [{"name": "search_schedule", "args": {"query": "Frühschicht"}}],
        }

    return FunctionChatModel(reply)


def create_app(db: str | Path, *, llm: BaseChatModel | None = None, lease_seconds: float = 30.0) -> Starlette:
    """Build the app on the session store in ``db`` (one SQLite file holds sessions and checkpoints).

    Args:
        db: the SQLite file; every server process started on it shares the sessions.
        llm: the chat model; defaults to `pick_model()`.
        lease_seconds: how soon another process continues a turn whose server died.
    """
    store = sqlite_sessions(db, lease_seconds=lease_seconds)
    agent = Agent(
        llm=llm or pick_model(),
        prompt="Du beantwortest Fragen zum Schichtplan.",
        tools=[durable_tool(search_schedule, idempotent=True)],  # a lookup: safe to run again after a crash
        sessions=store,
        name="shift-chat",
    )
    agent.recover()  # continue the turns a previous server left unfinished

    async def page(request: Request) -> Response:
        return FileResponse(PAGE, media_type="text/html")

    def cursor_of(value: Any) -> int:
        try:
            return max(int(value or 0), 0)
        except (TypeError, ValueError):
            raise UserError(f"cursor must be a number, got {value!r}.") from None

    async def chat(request: Request) -> Response:
        body = await request.json()
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            return JSONResponse({"error": "expected {'session_id', 'text'}"}, status_code=400)
        try:
            # Check that the caller may use this session before opening it.
            session = agent.session(body.get("session_id"))
            await session.aprompt(body["text"], message_id=body.get("message_id"))
            cursor = cursor_of(body.get("cursor"))
        except UserError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return StreamResponse(session.astream(cursor), headers={"X-Session-Id": session.id})

    async def reconnect(request: Request) -> Response:
        try:
            session = agent.session(request.query_params.get("session_id") or None)
            cursor = cursor_of(request.query_params.get("cursor"))
        except UserError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return StreamResponse(session.astream(cursor))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        store.close()

    routes = [Route("/", page), Route("/chat", chat, methods=["POST"]), Route("/chat/stream", reconnect)]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    """Serve the chat on 127.0.0.1."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--db", default="durable_chat.sqlite")
    parser.add_argument("--lease", type=float, default=30.0, help="lease_seconds of the session store")
    args = parser.parse_args()
    print(f"open http://127.0.0.1:{args.port}", flush=True)
    uvicorn.run(create_app(args.db, lease_seconds=args.lease), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
