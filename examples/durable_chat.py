"""A chat whose answers survive the server: durable sessions (SPEC §14) behind `session_routes`.

`POST /sessions` creates a session owned by the signed-in user; `POST /sessions/{id}/prompt` with
``{"input", "message_id"?, "cursor"?}`` stores the prompt (a retry with the same ``message_id`` runs nothing new)
and streams the session's log as NDJSON lines ``{"cursor": n, "chunk": ...}``; `GET /sessions/{id}/stream?cursor=n`
is the reconnect route: it replays every line after ``n`` and follows the live turn. Kill the server mid-answer,
start it again on the same SQLite file, and the page (`static/durable.html`) reconnects with its last cursor:
the turn continues where it stopped and every line arrives exactly once.

What a copy of this server gets for free: every request is authenticated (`DemoSignIn`, a signed cookie, is
the stand-in for your own sign-in), a session belongs to the user who created it (anyone else gets a 404 and
never a line of it), and every bad request (a body that is not JSON, a huge or negative cursor, an unknown
session) is one JSON error object with a real status. It is a Starlette app; FastAPI takes the same routes
(`FastAPI(routes=session_routes(...))`).

Runs offline with a scripted model; with OPENROUTER_API_KEY set it uses the real provider (`get_llm()`).

    .venv/bin/python examples/durable_chat.py --port 8000 --db chat.sqlite   # then open http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, ToolMessage
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ai_utils import Actor, Agent, durable_tool, get_llm, session_routes, sqlite_sessions
from ai_utils.testing import FunctionChatModel

PAGE = Path(__file__).parent / "static" / "durable.html"
ANSWER = [f"Zeile {i}: Die Frühschicht beginnt um {5 + i} Uhr." for i in range(1, 6)]


class DemoSignIn:
    """Stand-in for your sign-in: each browser gets a random user id, signed, in an HttpOnly cookie.

    The signing key is kept beside the database (created once, readable by its owner only), so a restarted
    server still knows its users. Replace this class with your own check (a session cookie, a JWT, an API
    key) returning an `Actor`, or `None` for no one (the routes answer 401).
    """

    cookie = "demo_user"

    def __init__(self, key_file: Path) -> None:
        if not key_file.exists():
            draft = key_file.with_name(f"{key_file.name}.{secrets.token_hex(4)}")
            draft.write_bytes(secrets.token_bytes(32))
            draft.chmod(0o600)
            with contextlib.suppress(FileExistsError):  # two servers starting at once: the first key wins
                os.link(draft, key_file)
            draft.unlink()
        self.secret = key_file.read_bytes()

    def _sign(self, user_id: str) -> str:
        return hmac.new(self.secret, user_id.encode(), hashlib.sha256).hexdigest()

    def __call__(self, request: Request) -> Actor | None:
        user_id, _, signature = request.cookies.get(self.cookie, "").partition(".")
        if user_id and hmac.compare_digest(signature, self._sign(user_id)):
            return Actor(user_id=user_id)
        return None

    def sign_in(self, request: Request, response: Response) -> None:
        """Give a browser without a valid cookie a new demo user."""
        if self(request) is None:
            user_id = secrets.token_hex(8)
            response.set_cookie(self.cookie, f"{user_id}.{self._sign(user_id)}", httponly=True, samesite="strict")


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


async def json_http_error(request: Request, exc: Exception) -> JSONResponse:
    """The router's own 404 / 405 as the same JSON error object the routes send."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(status, "HTTPError")
    message = "No such route." if status == 404 else "The server could not answer that request."
    return JSONResponse({"kind": "error", "type": kind, "message": message}, status_code=status)


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
    sign_in = DemoSignIn(Path(db).with_suffix(".signing-key"))

    async def page(request: Request) -> Response:
        response = FileResponse(PAGE, media_type="text/html")
        sign_in.sign_in(request, response)
        return response

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        store.close()

    routes = [Route("/", page), *session_routes(agent, path="/sessions", authenticate=sign_in)]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: json_http_error})
    app.state.store = store
    return app


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
