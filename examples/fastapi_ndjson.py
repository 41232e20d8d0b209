"""A streaming agent endpoint with human-in-the-loop resume, plus a tiny web page that renders it.

Built on Starlette (FastAPI works the same: `StreamResponse` is a Starlette response, so a FastAPI
route can return it unchanged). `POST /agent` streams `application/x-ndjson` — one JSON value a line
in the `ai_utils.client` shapes: a JSON string is text, `{"kind": "tool", ...}` a tool call,
`{"kind": "interrupt", ...}` a pause for approval. Resume with `{"thread_id": ..., "decision": "approve"}`.
`GET /` serves `static/index.html`, which renders that stream with `fetch` and shows an Approve button.

Runs offline with a scripted model; with OPENROUTER_API_KEY set it uses the real provider (`get_llm()`).

    .venv/bin/python examples/fastapi_ndjson.py --port 8000    # then open http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import os
import uuid
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.memory import InMemorySaver
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ai_utils import Agent, StreamResponse, get_llm
from ai_utils.testing import FakeChatModel

PAGE = Path(__file__).parent / "static" / "index.html"
OUTBOX: list[dict[str, str]] = []


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


def create_app(llm: BaseChatModel | None = None) -> Starlette:
    """Build the app: `GET /` serves the page, `POST /agent` streams the agent as NDJSON.

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

    async def page(request: Request) -> Response:
        return FileResponse(PAGE, media_type="text/html")

    async def run_agent(request: Request) -> Response:
        body = await request.json()
        if not isinstance(body, dict):
            return JSONResponse({"error": "expected a JSON object"}, status_code=400)
        thread_id = body.get("thread_id") or uuid.uuid4().hex
        stream = agent.astream(
            body.get("input"), thread_id=thread_id, decision=body.get("decision"), show_tool_calls=True
        )
        # The page needs the thread id to resume; a header keeps the body pure stream chunks.
        return StreamResponse(stream, headers={"X-Thread-Id": thread_id})

    return Starlette(routes=[Route("/", page), Route("/agent", run_agent, methods=["POST"])])


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
