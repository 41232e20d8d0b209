"""Generated tool-call ids of the fakes are unique across model instances and processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from ai_utils import Agent, FunctionChatModel, sqlite_saver

PROC = Path(__file__).parent / "_fake_ids_proc.py"


def _turn(path: Path, user: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(PROC), str(path), "t", user], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    events: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return events


def test_a_thread_continued_in_a_second_process_gets_new_tool_call_ids(tmp_path: Path) -> None:
    path = tmp_path / "thread.sqlite"
    first = _turn(path, "cats")
    second = _turn(path, "dogs")  # a fresh process: the model's call counter starts again at 1

    for events in (first, second):
        assert [(e["phase"], e["tool_name"]) for e in events] == [("start", "lookup"), ("end", "lookup")]
        assert events[0]["id"] == events[1]["id"]  # every start has its end
    assert first[0]["id"] != second[0]["id"]

    saver = sqlite_saver(path)
    messages = Agent(llm=FunctionChatModel(lambda m, t: "x"), checkpointer=saver).get_state("t").values["messages"]
    calls = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert len(calls) == len(set(calls)) == 2 and results == calls
    saver.close()  # type: ignore[attr-defined]


def test_two_model_instances_in_one_process_never_share_a_generated_id() -> None:
    script = [{"tool_calls": [{"name": "lookup", "args": {}}]}]
    one, two = (FunctionChatModel(lambda m, t: script[0]) for _ in range(2))
    assert one.invoke("x").tool_calls[0]["id"] != two.invoke("x").tool_calls[0]["id"]
