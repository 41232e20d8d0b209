"""A two-step loop whose second tool kills its process the first time (used by test_resume_process.py).

python _loop_crash_proc.py DB LEDGER (start | continue): tool calls are appended to LEDGER.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from _loop_support import Ledger
from langchain_core.tools import tool

from ai_utils import LoopRunner, ctx, define_loop, permission, sqlite_saver, tool_step

if __name__ == "__main__":
    db, ledger_path, command = sys.argv[1:4]
    ledger = Ledger(Path(ledger_path))

    @tool
    def fetch(order_id: str) -> dict[str, str]:
        """Fetch an order."""
        ledger.add("tool", "fetch")
        return {"order_id": order_id, "amount": "12.00"}

    @tool
    def charge(order_id: str, amount: str) -> str:
        """Charge an order."""
        ledger.add("tool", "charge")
        if command == "start":
            os._exit(1)  # the process dies mid-step, as with kill -9
        return f"charged {amount} for {order_id}"

    loop = define_loop(
        "crash",
        start="fetch",
        steps={
            "fetch": tool_step("fetch", input={"order_id": ctx("request.order_id")}, next="charge"),
            "charge": tool_step(
                "charge", input={"order_id": ctx("fetch.order_id"), "amount": ctx("fetch.amount")}, next="end"
            ),
        },
        permissions=[permission("all", resource="tool", action="call", effect="allow", match={"tool": "*"})],
        result={"data": ctx("charge")},
    )
    with sqlite_saver(db) as saver:
        runner = LoopRunner(loop, tools=[fetch, charge], checkpointer=saver)
        if command == "start":
            runner.invoke({"request": {"order_id": "C-1"}}, thread_id="t")
        state = runner.state("t")
        out = runner.invoke(thread_id="t")
        print(json.dumps({"before": state, "data": out.data, "after": runner.state("t")}))  # type: ignore[union-attr]
