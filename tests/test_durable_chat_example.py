"""examples/durable_chat.py in headless Chromium: the server is killed mid-answer, a new one starts on the
same SQLite file, and the page reconnects with its last cursor and shows the whole answer exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _services import free_port
from test_fastapi_example import Browser, browser  # noqa: F401  # the WebDriver fixture

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
