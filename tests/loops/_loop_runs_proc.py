"""One call of a hooked, gated loop in its own process (used by test_runs_process.py).

python _loop_runs_proc.py CHECKPOINTS RUNS LEDGER (start THREAD | list | approve THREAD GATE | continue THREAD)

With ``DIE_IN_REFUND=1`` the refund tool ends the process (``os._exit``) the first time it runs, as a crash would.
Tool calls are appended to LEDGER, so the parent test can count what ran in which process.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from ai_utils import (
    LoopRunner,
    UserError,
    command_hook,
    ctx,
    define_loop,
    permission,
    sqlite_loop_runs,
    sqlite_saver,
    tool_step,
)


def runner(saver: Any, store: Any, ledger: Path) -> LoopRunner:
    def note(kind: str, value: str) -> None:
        with ledger.open("a") as file:
            file.write(json.dumps({"pid": os.getpid(), "kind": kind, "value": value}) + "\n")

    @tool
    def issue_refund(order_id: str, reason: str) -> dict[str, str]:
        """Refund an order."""
        note("refund", f"{order_id} / {reason}")
        if os.environ.get("DIE_IN_REFUND") == "1":
            os._exit(9)
        return {"refund_id": f"R-{order_id}", "reason": reason}

    loop = define_loop(
        "hooked-refunds",
        start="refund",
        steps={
            "refund": tool_step(
                "issue_refund",
                input={"order_id": ctx("request.order_id"), "reason": ctx("audit.start.stdout")},
                next="end",
            )
        },
        permissions=[
            permission(
                "refunds",
                resource="tool",
                action="call",
                effect="approval",
                match={"tool": "issue_refund"},
                message="Refunds require human approval.",
            )
        ],
        hooks={"loop:start": [command_hook(["echo", "ticket", ctx("request.order_id")], save_as="audit.start")]},
        result={"data": ctx("refund")},
    )
    return LoopRunner(loop, tools=[issue_refund], checkpointer=saver, run_store=store)


def main() -> None:
    checkpoints, runs, ledger, command, *rest = sys.argv[1:]
    with sqlite_saver(checkpoints) as saver, sqlite_loop_runs(runs) as store:
        loop = runner(saver, store, Path(ledger))
        out: Any
        try:
            if command == "start":
                out = loop.invoke({"request": {"order_id": "A-7"}}, thread_id=rest[0])
            elif command == "list":
                out = [
                    {
                        "run_id": r.run_id,
                        "thread_id": r.thread_id,
                        "state": r.state,
                        "gate_ids": list(r.gate_ids),
                        "step_keys": list(r.step_keys),
                        "created_at": r.created_at.isoformat(),
                    }
                    for r in loop.runs()
                ]
            elif command == "approve":
                out = loop.invoke(thread_id=rest[0], decision="approve", gate_id=rest[1])
            else:
                out = loop.invoke(thread_id=rest[0])
        except UserError as error:
            print(json.dumps({"error": type(error).__name__, "message": str(error)}))
            return
        if hasattr(out, "data"):
            out = {"data": out.data, "context": out.context, "state": loop.state(rest[0])}
        print(json.dumps(out))


if __name__ == "__main__":
    main()
