"""An agent step whose model calls a gated tool, run in its own process (used by test_resume_process.py).

python _loop_agent_proc.py DB LEDGER (start | approve): model and tool calls are appended to LEDGER.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from _loop_support import Ledger
from langchain_core.tools import tool

from ai_utils import FakeChatModel, LoopRunner, agent_step, ctx, define_loop, permission, sqlite_saver

SCRIPT: list[Any] = [
    {
        "tool_calls": [
            {"name": "lookup", "args": {"order_id": "1"}},
            {"name": "refund_order", "args": {"order_id": "1"}},
        ]
    },
    "Refunded order 1.",
]

if __name__ == "__main__":
    db, ledger_path, command = sys.argv[1:4]
    ledger = Ledger(Path(ledger_path))

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        ledger.add("tool", "lookup")
        return "paid"

    @tool
    def refund_order(order_id: str) -> str:
        """Refund an order."""
        ledger.add("tool", "refund_order")
        return "refunded"

    class CountingModel(FakeChatModel):
        def _record(self, messages: list[Any]) -> int:
            ledger.add("model", "helper")
            return super()._record(messages)

    loop = define_loop(
        "agent-gate",
        start="helper",
        steps={"helper": agent_step(tools=["lookup", "refund_order"], next="end")},
        permissions=[
            permission("read", resource="tool", action="call", effect="allow", match={"tool": "lookup"}),
            permission("ask", resource="tool", action="call", effect="approval", match={"tool": "refund_order"}),
        ],
        result={"presentation": {"text": ctx("helper.text")}},
    )
    # A resumed process gets only the replies still due: a model call repeated by mistake would run out.
    llm = CountingModel(SCRIPT if command == "start" else SCRIPT[1:])
    with sqlite_saver(db) as saver:
        runner = LoopRunner(loop, llm=llm, tools=[lookup, refund_order], checkpointer=saver)
        if command == "start":
            out: Any = runner.invoke({"request": {}}, thread_id="t")
        else:
            out = runner.invoke(thread_id="t", decision="approve").presentation  # type: ignore[union-attr]
        print(json.dumps({"out": out, "state": runner.state("t")}))
