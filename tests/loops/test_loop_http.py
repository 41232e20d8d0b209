"""A loop behind a real NDJSON endpoint: the approval card, the decision, and a denial as the error object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from loops._loop_support import Ledger, support_loop, support_model, support_tools
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from ai_utils import LoopRunner, MemorySaver, StreamResponse
from ai_utils.client import iter_ndjson


def test_a_refund_is_paused_approved_or_rejected_over_http(serve: Callable[..., Any]) -> None:
    ledger = Ledger()
    runner = LoopRunner(
        support_loop(), llm=support_model(ledger), tools=support_tools(ledger), checkpointer=MemorySaver()
    )

    async def endpoint(request: Request) -> StreamResponse:
        body = await request.json()
        return StreamResponse(
            runner.astream(
                body.get("input"),
                thread_id=body["thread_id"],
                decision=body.get("decision"),
                gate_id=body.get("gate_id"),
            )
        )

    server = serve(Starlette(routes=[Route("/loop", endpoint, methods=["POST"])]))

    def post(**body: Any) -> list[Any]:
        response = httpx.post(f"{server.base_url}/loop", json=body, timeout=30)
        if response.headers["content-type"].startswith("application/json"):  # failed before its first line
            assert response.status_code == 500
            return [response.json()]
        assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
        return list(iter_ndjson(response.text.splitlines()))

    refund = {"request": {"order_id": "H-1", "text": "refund please"}}
    triage, card = post(thread_id="h1", input=refund)
    # The triage step's structured answer is its own event, never a tool call named after the schema.
    assert triage == {
        "kind": "custom",
        "data": {
            "type": "loop.step.output",
            "step_key": "triage",
            "output": {"needs_refund": True, "category": "billing"},
        },
    }
    assert card["kind"] == "interrupt" and card["question"] == "Refunds require human approval."
    assert post(thread_id="h1", decision="approve", gate_id=card["gate_id"]) == []
    assert runner.state("h1") == "completed" and ledger.count("tool", "issue_refund") == 1

    assert post(thread_id="h2", input=refund)[-1]["kind"] == "interrupt"
    [error] = post(thread_id="h2", decision="reject")
    assert error["kind"] == "error" and error["type"] == "LoopPermissionDeniedError"
    assert ledger.count("tool", "issue_refund") == 1

    lines = post(thread_id="h3", input={"request": {"order_id": "H-3", "text": "password?"}})
    assert "".join(line for line in lines if isinstance(line, str)).startswith("Open Settings")
