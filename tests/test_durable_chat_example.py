"""examples/durable_chat.py in headless Chromium: the server is killed mid-answer, a new one starts on the
same SQLite file, and the page reconnects with its last cursor and shows the whole answer exactly once."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _services import free_port
from test_fastapi_example import Browser, browser  # noqa: F401  # the WebDriver fixture

from ai_utils.testing import FunctionChatModel

EXAMPLE = Path(__file__).parents[1] / "examples" / "durable_chat.py"
ANSWER = [f"Zeile {i}: Die Frühschicht beginnt um {5 + i} Uhr." for i in range(1, 6)]


class Server:
    def __init__(self, port: int, db: Path) -> None:
        self.port, self.db = port, db
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, tool_seconds: float) -> None:
        env = {**os.environ, "DURABLE_CHAT_TOOL_SECONDS": str(tool_seconds)}
        env.pop("OPENROUTER_API_KEY", None)
        cmd = [sys.executable, str(EXAMPLE), "--port", str(self.port), "--db", str(self.db), "--lease", "1.0"]
        self.process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.url + "/", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert self.process.poll() is None and time.monotonic() < deadline, "the example server did not start"
            time.sleep(0.1)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(free_port(), tmp_path / "chat.sqlite")
    yield running
    running.stop()


def test_the_page_survives_a_server_killed_mid_answer(server: Server, browser: Browser) -> None:  # noqa: F811
    server.start(tool_seconds=60)  # the first server dies while its tool runs
    browser.open(server.url + "/")
    browser.click("#send")
    browser.wait_for("return document.getElementById('log').innerText.includes('[tool start] search_schedule')", 30)
    shown_before = browser.js("return document.getElementById('log').innerText")
    assert "Ich sehe im Schichtplan nach." in shown_before

    server.kill()  # mid-answer: the tool was running, the answer not written yet
    server.start(tool_seconds=0)  # a new process on the same SQLite file and port

    browser.wait_for("return document.getElementById('log').dataset.state === 'idle'", 60)
    shown = browser.js("return document.getElementById('log').innerText")
    assert "[the server restarted; the turn continues]" in shown
    for line in ANSWER:
        assert shown.count(line) == 1, shown
    assert shown.count("Ich sehe im Schichtplan nach.") == 1
    assert shown.index("[tool end] search_schedule") < shown.index(ANSWER[0]) < shown.index("[turn end: end_turn]")
    cursors = browser.js("return [...document.querySelectorAll('[data-cursor]')].map((e) => Number(e.dataset.cursor))")
    assert cursors == list(range(1, len(cursors) + 1))  # every stored line once, none missing


def test_the_example_server_authenticates_keeps_sessions_to_their_owner_and_answers_json_errors(
    serve: Callable[[Any], Any], tmp_path: Path
) -> None:
    spec = importlib.util.spec_from_file_location("durable_chat_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    app = example.create_app(tmp_path / "chat.sqlite", llm=FunctionChatModel(lambda messages, tools: "Hallo."))
    server = serve(app)
    json_headers = {"content-type": "application/json"}
    try:
        with (
            httpx.Client(base_url=server.base_url, timeout=30) as alice,
            httpx.Client(base_url=server.base_url, timeout=30) as bob,
        ):
            alice.get("/")
            bob.get("/")  # each browser gets its own signed demo user
            sid = alice.post("/sessions", content=b"{}", headers=json_headers).json()["session_id"]
            lines = [
                json.loads(x) for x in alice.post(f"/sessions/{sid}/prompt", json={"input": "Hi"}).iter_lines() if x
            ]
            assert lines[1]["chunk"] == "Hallo."

            answers = {
                "another user's session": bob.get(f"/sessions/{sid}/stream?cursor=0"),
                "no sign-in": httpx.get(f"{server.base_url}/sessions/{sid}/stream?cursor=0"),
                "a body that is not JSON": alice.post(f"/sessions/{sid}/prompt", content=b"Hi!", headers=json_headers),
                "not JSON at all": alice.post(f"/sessions/{sid}/prompt", content=b"Hi!"),
                "a huge cursor": alice.get(f"/sessions/{sid}/stream?cursor=9223372036854775808"),
                "an unknown session": alice.get("/sessions/nobody/stream"),
                "an unknown route": alice.get("/chat"),
            }
    finally:
        app.state.store.close()
    statuses = {name: response.status_code for name, response in answers.items()}
    assert statuses == {
        "another user's session": 404,
        "no sign-in": 401,
        "a body that is not JSON": 400,
        "not JSON at all": 415,
        "a huge cursor": 400,
        "an unknown session": 404,
        "an unknown route": 404,
    }
    for response in answers.values():
        assert response.headers["content-type"] == "application/json" and response.json()["kind"] == "error"
