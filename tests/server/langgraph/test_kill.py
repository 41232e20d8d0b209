"""Two LangGraph API server processes (uvicorn) on one Postgres (and on one SQLite file): the one running a run is
SIGKILLed while its tool sleeps; the other process finishes the run, the SDK's ``join`` there returns it, and a
stream followed there shows each message once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _services import free_port
from langgraph_sdk import get_sync_client

TESTS = Path(__file__).resolve().parents[2]


class Worker:
    """``uvicorn --factory _langgraph_app:from_env`` in its own process."""

    def __init__(self, db: str, tool_seconds: float, log: Path) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        env = {
            **os.environ,
            "LG_DB": db,
            "LG_LEASE": "1",
            "LG_TOOL_SECONDS": str(tool_seconds),
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        }
        port = self.url.rsplit(":", 1)[1]
        cmd = [sys.executable, "-m", "uvicorn", "--factory", "_langgraph_app:from_env", "--port", port]
        cmd += ["--host", "127.0.0.1", "--log-level", "warning", "--lifespan", "off"]
        with log.open("wb") as err:
            self.process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(self.url + "/assistants/x", timeout=2).status_code == 401:  # up (and closed to strangers)
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"the API server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture(params=["postgres", "sqlite"])
def workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Worker, Worker]]:
    db = request.getfixturevalue("postgres_uri") if request.param == "postgres" else str(tmp_path / "threads.sqlite")
    started: list[Worker] = []
    try:
        started.append(Worker(db, tool_seconds=120, log=tmp_path / "doomed.log"))  # its tool outlives it
        started.append(Worker(db, tool_seconds=0, log=tmp_path / "survivor.log"))
        yield started[0], started[1]
    finally:
        for worker in started:
            worker.stop()


def test_a_run_whose_server_is_killed_completes_on_the_other_and_join_returns_it(
    workers: tuple[Worker, Worker],
) -> None:
    doomed, survivor = workers
    with (
        get_sync_client(url=doomed.url, api_key="alice-key", timeout=60) as first,
        get_sync_client(url=survivor.url, api_key="alice-key", timeout=120) as second,
    ):
        tid = first.threads.create()["thread_id"]
        run = first.runs.create(tid, "support", input={"messages": [{"role": "user", "content": "slow k9"}]})
        assert second.runs.get(tid, run["run_id"])["status"] in ("pending", "running")  # one database

        seen: list[tuple[str, Any]] = []
        stream = second.runs.join_stream(tid, run["run_id"], stream_mode=["messages-tuple", "updates"])
        for part in stream:
            seen.append((part.event, part.data))
            if part.event == "messages" and part.data[0].get("tool_call_chunks"):
                break  # the tool runs in the doomed process now
        doomed.kill()
        for part in stream:  # the same stream goes on: the survivor takes the run over once the lease expires
            seen.append((part.event, part.data))

        joined = second.runs.join(tid, run["run_id"])
        assert joined["messages"][-1]["content"] == "Done: value of k9."
        assert [m["type"] for m in joined["messages"]] == ["human", "ai", "tool", "ai"]
        assert second.runs.get(tid, run["run_id"])["status"] == "success"

    assert seen[-1] == ("end", None)
    tokens: dict[str, str] = {}
    for event, data in seen:
        if event == "messages" and data[0]["type"] == "AIMessageChunk":
            tokens[data[0]["id"]] = tokens.get(data[0]["id"], "") + data[0]["content"]
    assert list(tokens.values()) == ["One moment. ", "Done: value of k9."]  # each message once
    updates = [next(iter(data)) for event, data in seen if event == "updates"]
    assert updates == ["model", "tools", "model"]
    results = [data[0] for event, data in seen if event == "messages" and data[0]["type"] == "tool"]
    assert [r["content"] for r in results] == ["value of k9"]
