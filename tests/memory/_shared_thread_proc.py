"""Run agent turns on one thread of a shared checkpointer from a separate process (test_shared_threads.py).

Usage: python _shared_thread_proc.py '<json>' with keys
  backend: "sqlite:<path>", "rawsqlite:<path>" (LangGraph's own SqliteSaver, no cross-process lock) or a Postgres URI
  thread, worker: the thread id and this process's name (its messages are "<worker>-<n>")
  turns: how many turns to run
  ready_file / start_file: write ready_file once set up, then wait for start_file (both processes start together)
  started_file / release_file: the first model call writes started_file, then waits for release_file
Prints one JSON line: {"answers": [...], "errors": ["<type>: <message>", ...], "turns": [[start, end], ...],
"model_calls": [[start, end], ...]} (wall-clock seconds of each invoke, and of each model call inside a run).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from ai_utils import Agent
from ai_utils.memory import postgres_saver, sqlite_saver
from ai_utils.testing import FunctionChatModel


def wait_for(path: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.005)


def saver_for(backend: str) -> Any:
    if backend.startswith("sqlite:"):
        return sqlite_saver(backend.removeprefix("sqlite:"))
    if backend.startswith("rawsqlite:"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(backend.removeprefix("rawsqlite:"), check_same_thread=False, timeout=30)
        saver = SqliteSaver(conn)
        saver.setup()
        return saver
    return postgres_saver(backend)


def main(args: dict[str, Any]) -> None:
    started = Path(args["started_file"]) if args.get("started_file") else None
    release = Path(args["release_file"]) if args.get("release_file") else None

    model_calls: list[list[float]] = []

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        began = time.time()
        if started is not None and release is not None and not started.exists():
            started.write_text("running")
            wait_for(release)
        time.sleep(0.03)  # a model's latency: turns of the two processes overlap
        last = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
        model_calls.append([began, time.time()])
        return f"ack {last.text}"

    saver = saver_for(args["backend"])
    agent = Agent(llm=FunctionChatModel(reply), checkpointer=saver)
    agent.get_state(args["thread"])  # connected and warm before the start
    if args.get("ready_file"):
        Path(args["ready_file"]).write_text("ready")
    if args.get("start_file"):
        wait_for(Path(args["start_file"]))
    answers, errors, turns = [], [], []
    for n in range(args["turns"]):
        began = time.time()
        try:
            answers.append(agent.invoke(f"{args['worker']}-{n}", thread_id=args["thread"]))
        except Exception as error:
            errors.append(f"{type(error).__name__}: {error}")
        turns.append([began, time.time()])
    print(json.dumps({"answers": answers, "errors": errors, "turns": turns, "model_calls": model_calls}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
