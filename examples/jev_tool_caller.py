"""JevToolCaller: Jev picks exactly one tool and its parameters — only from candidate lists you provide.

No argument is invented: the order id must be one of the customer's orders. A risky tool (`cancel_order`)
pauses for human approval first. Offline it runs against `FakeJevServer` on 127.0.0.1; with
OPENROUTER_API_KEY set it asks the real Jev model. Run: `.venv/bin/python examples/jev_tool_caller.py`
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from ai_utils import JevTool, JevToolCaller
from ai_utils.testing import FakeJevServer

ORDERS = [{"id": "A-17", "item": "Kaffeemaschine"}, {"id": "B-42", "item": "Wasserkocher"}]


def order_status(*, params: dict[str, Any], **_: Any) -> str:
    return f"order {params['order']['id']} ({params['order']['item']}) ships tomorrow"


def cancel_order(*, params: dict[str, Any], **_: Any) -> str:
    return f"order {params['order']['id']} cancelled"


def main() -> None:
    real = bool(os.environ.get("OPENROUTER_API_KEY"))
    print("(real Jev model on OpenRouter)" if real else "(offline: FakeJevServer; set OPENROUTER_API_KEY)")
    with contextlib.nullcontext() if real else FakeJevServer() as jev:
        server = {} if jev is None else {"base_url": jev.url, "api_key": jev.api_key}
        caller = JevToolCaller(
            tools=[
                JevTool("order_status", "Where is an order?", order_status, params={"order": ORDERS}),
                JevTool("cancel_order", "Cancel an order.", cancel_order, params={"order": ORDERS}),
            ],
            prompt="You help customers with their orders.",
            checkpointer=InMemorySaver(),
            interrupt_on={"cancel_order": "Really cancel this order?"},
            **server,
        )
        for request, tool, order in [
            ("Wo bleibt meine Kaffeemaschine?", "order_status", "c0"),
            ("Bitte den Wasserkocher stornieren.", "cancel_order", "c1"),
        ]:
            if jev is not None:  # script the fake server's answers: the tool, then the order (c0 = first)
                jev.answer("tool", choice=tool)
                jev.answer("order", choice=order)
            print(f"\nYou: {request}")
            out = caller.invoke({"question": request}, thread_id=f"t-{tool}")
            if out.kind == "interrupt":
                print(f"[interrupt] {out.question} -> {out.tool.name} {out.params['order'].value}")
                out = caller.invoke(thread_id=f"t-{tool}", decision="approve")
            if out.kind == "gated":  # Jev was not sure enough: nothing ran, ask the user instead
                print(f"[gated] below the confidence gate: {out.below}")
                continue
            print(f"{out.kind}: {out.tool.name} (confidence {out.tool.confidence:.2f}) -> {out.value}")


if __name__ == "__main__":
    main()
