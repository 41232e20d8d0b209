"""A streaming agent endpoint with human-in-the-loop resume, plus a tiny web page that renders it.

A FastAPI app built from `agent_routes`: `POST /agent` streams `application/x-ndjson` — one JSON value a line
in the `ai_utils.client` shapes: a JSON string is text, `{"kind": "tool", ...}` a tool call,
`{"kind": "interrupt", ...}` a pause for approval. Resume with `{"thread_id": ..., "decision": "approve"}`.
The same agent also speaks AG-UI (`POST /ag-ui`, e.g. CopilotKit or `@ag-ui/client`) and the Vercel AI SDK
UI message stream (`POST /vercel-ai`, `useChat`). `GET /` serves `static/index.html`, which renders the
NDJSON stream with `fetch` and shows an Approve button.

Every API request is authenticated: the page gets a signed demo user id in an HttpOnly cookie (`DemoSignIn`,
a stand-in for your own sign-in), each thread belongs to the user whose requests started it, and every error
is one JSON object (`{"kind": "error", "type", "message"}`) with a real status.

Runs offline with a scripted model; with OPENROUTER_API_KEY set it uses the real provider (`get_llm()`).

    .venv/bin/python examples/fastapi_ndjson.py --port 8000    # then open http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.memory import InMemorySaver
from starlette.exceptions import HTTPException

from ai_utils import Actor, Agent, agent_routes, get_llm
from ai_utils.testing import FakeChatModel

PAGE = Path(__file__).parent / "static" / "index.html"
OUTBOX: list[dict[str, str]] = []


class DemoSignIn:
    """Stand-in for your sign-in: each browser gets a random user id, signed, in an HttpOnly cookie.

    Replace it with your own check (a session cookie, a JWT, an API key) returning an `Actor`, or `None` for
    no one (the routes answer 401).
    """

    cookie = "demo_user"

    def __init__(self, secret: bytes) -> None:
        self.secret = secret

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
            value = f"{user_id}.{self._sign(user_id)}"
            response.set_cookie(self.cookie, value, httponly=True, samesite="strict")


def send_mail(to: str, subject: str, body: str) -> str:
    """Send an e-mail.

    Args:
        to: recipient address.
        subject: subject line.
        body: message text.
    """
    OUTBOX.append({"to": to, "subject": subject, "body": body})
    return f"Mail to {to} sent."


def pick_model() -> BaseChatModel:
    """The real provider when OPENROUTER_API_KEY is set, else a scripted model that repeats its script."""
    if os.environ.get("OPENROUTER_API_KEY"):
        return get_llm()
    return FakeChatModel(
        [
            {
                "content": "Ich schreibe Anna eine kurze Mail zum Termin.",
                "tool_calls": [
                    {
                        "name": "send_mail",
                        "args": {"to": "anna@example.com", "subject": "Termin", "body": "Passt Dienstag um 10?"},
                    }
                ],
            },
            "Erledigt: die Mail an Anna ist verschickt.",
        ],
        cycle=True,
    )


async def json_http_error(request: Request, exc: Exception) -> JSONResponse:
    """The router's own 404 / 405 as the same JSON error object the routes send."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(status, "HTTPError")
    message = "No such route." if status == 404 else "The server could not answer that request."
    return JSONResponse({"kind": "error", "type": kind, "message": message}, status_code=status)


def create_app(llm: BaseChatModel | None = None) -> FastAPI:
    """Build the app: `GET /` serves the page, `POST /agent` (and `/ag-ui`, `/vercel-ai`) run the agent.

    Args:
        llm: the chat model; defaults to `pick_model()`.
    """
    agent = Agent(
        llm=llm or pick_model(),
        prompt="Du bist ein hilfreicher Assistent. Mails verschickst du mit send_mail.",
        tools=[send_mail],
        checkpointer=InMemorySaver(),
        interrupt_on={"send_mail": {"decisions": ["approve", "reject"], "question": "Send this mail?"}},
    )
    sign_in = DemoSignIn(secrets.token_bytes(32))
    app = FastAPI(exception_handlers={HTTPException: json_http_error})

    @app.get("/", include_in_schema=False)
    async def page(request: Request) -> Response:
        response = FileResponse(PAGE, media_type="text/html")
        sign_in.sign_in(request, response)
        return response

    app.router.routes.extend(agent_routes(agent, path="/agent", authenticate=sign_in))
    app.router.routes.extend(agent_routes(agent, path="/ag-ui", protocol="ag-ui", authenticate=sign_in))
    app.router.routes.extend(agent_routes(agent, path="/vercel-ai", protocol="vercel-ai", authenticate=sign_in))
    return app


def main() -> None:
    """Serve the demo on 127.0.0.1."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    print(f"open http://127.0.0.1:{args.port}")
    uvicorn.run(create_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
