"""An Agent behind a real NDJSON endpoint: one route for new messages and approval resumes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from conftest import LiveServer
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from ai_utils import Agent, StreamResponse
from ai_utils.client import is_interrupt, is_reasoning_event, is_tool_event, iter_ndjson

sent: list[str] = []


@tool
def send_mail(to: str) -> str:
    """Send a mail."""
    sent.append(to)
    return f"sent to {to}"


def make_app(agent: Agent) -> Starlette:
    async def run(request: Request) -> StreamResponse:
        body = await request.json()
        return StreamResponse(
            agent.astream(
                body.get("input"),
                thread_id=body["thread_id"],
                decision=body.get("decision"),
                show_tool_calls=body.get("show_tool_calls", False),
                show_reasoning=body.get("show_reasoning", False),
            )
        )

    return Starlette(routes=[Route("/agent", run, methods=["POST"])])


def post(server: LiveServer, **body: Any) -> list[Any]:
    with httpx.stream("POST", f"{server.base_url}/agent", json=body, timeout=10) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        return list(iter_ndjson(response.iter_lines()))


def test_message_then_approval_resume_over_http(serve: Callable[[Any], LiveServer]) -> None:
    from ai_utils.testing import FakeChatModel

    sent.clear()
    llm = FakeChatModel(
        [
            {
                "reasoning": "Mail needed.",
                "content": "Ich schreibe.",
                "tool_calls": [{"name": "send_mail", "args": {"to": "bob"}}],
            },
            "Erledigt.",
        ]
    )
    agent = Agent(
        llm=llm,
        tools=[send_mail],
        checkpointer=InMemorySaver(),
        interrupt_on={"send_mail": {"decisions": ["approve", "reject"], "question": "Mail senden?"}},
    )
    server = serve(make_app(agent))

    first = post(server, thread_id="u1", input="Mail an bob", show_tool_calls=True, show_reasoning=True)
    assert "".join(c for c in first if isinstance(c, str)) == "Ich schreibe."
    assert any(is_reasoning_event(c) for c in first)
    assert [c["phase"] for c in first if is_tool_event(c)] == ["start"]
    assert is_interrupt(first[-1]) and first[-1]["question"] == "Mail senden?" and sent == []

    resumed = post(server, thread_id="u1", decision="approve", show_tool_calls=True)
    assert sent == ["bob"]
    assert [c["phase"] for c in resumed if is_tool_event(c)] == ["end"]
    assert "".join(c for c in resumed if isinstance(c, str)) == "Erledigt."


def test_events_stay_out_of_the_stream_unless_asked_for(serve: Callable[[Any], LiveServer]) -> None:
    from ai_utils.testing import FakeChatModel

    sent.clear()
    llm = FakeChatModel([{"reasoning": "hm", "tool_calls": [{"name": "send_mail", "args": {"to": "ann"}}]}, "Fertig."])
    server = serve(make_app(Agent(llm=llm, tools=[send_mail], checkpointer=InMemorySaver())))
    lines = post(server, thread_id="u2", input="Mail an ann")
    assert lines and all(isinstance(c, str) for c in lines)
    assert "".join(lines) == "Fertig." and sent == ["ann"]
