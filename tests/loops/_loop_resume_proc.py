"""One call of the support loop in its own process (used by test_resume_process.py).

python _loop_resume_proc.py DB LEDGER THREAD (start TEXT | decide DECISION | state)

Model and tool calls are appended to LEDGER, so the parent test can count what ran in which process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _loop_support import Ledger, support_loop, support_model, support_tools

from ai_utils import LoopPermissionDeniedError, LoopRunner, sqlite_saver

if __name__ == "__main__":
    db, ledger_path, thread, command = sys.argv[1:5]
    ledger = Ledger(Path(ledger_path))
    with sqlite_saver(db) as saver:
        runner = LoopRunner(support_loop(), llm=support_model(ledger), tools=support_tools(ledger), checkpointer=saver)
        if command == "state":
            print(json.dumps({"state": runner.state(thread)}))
            sys.exit(0)
        try:
            if command == "start":
                out = runner.invoke({"request": {"order_id": "A-7", "text": sys.argv[5]}}, thread_id=thread)
            else:
                out = runner.invoke(thread_id=thread, decision=sys.argv[5])
        except LoopPermissionDeniedError as error:
            print(json.dumps({"error": type(error).__name__, "message": str(error), "state": runner.state(thread)}))
            sys.exit(0)
        if isinstance(out, dict):
            print(json.dumps({"interrupt": out, "state": runner.state(thread)}))
        else:
            print(json.dumps({"data": out.data, "presentation": out.presentation, "state": runner.state(thread)}))
