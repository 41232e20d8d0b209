"""The streaming endpoint example, driven in a real headless Chromium through chromedriver (W3C WebDriver)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from _services import free_port

EXAMPLE = Path(__file__).parents[1] / "examples" / "fastapi_ndjson.py"
CHROMIUM = "/usr/bin/chromium"
INSTALL = "apt-get update && apt-get install -y chromium chromium-driver  (or: scripts/test --services)"
CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C WebDriver element reference key


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fastapi_ndjson_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Browser:
    """A minimal W3C WebDriver client: just what the test needs."""

    def __init__(self, http: httpx.Client, session_id: str) -> None:
        self.http = http
        self.session = f"/session/{session_id}"

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self.http.request(method, self.session + path, json=body)
        assert response.status_code == 200, response.text
        return response.json()["value"]

    def open(self, url: str) -> None:
        self.call("POST", "/url", {"url": url})

    def click(self, css: str) -> None:
        element = self.call("POST", "/element", {"using": "css selector", "value": css})
        self.call("POST", f"/element/{element[ELEMENT]}/click", {})

    def js(self, script: str) -> Any:
        return self.call("POST", "/execute/sync", {"script": script, "args": []})

    def wait_for(self, script: str, timeout: float = 10) -> Any:
        deadline = time.monotonic() + timeout
        while not (result := self.js(script)):
            if time.monotonic() > deadline:
                log = self.js("return document.getElementById('log').innerText")
                pytest.fail(f"timed out waiting for {script!r}; the page shows:\n{log}")
            time.sleep(0.05)
        return result


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    driver = shutil.which("chromedriver")
    if driver is None or not Path(CHROMIUM).exists():
        pytest.fail(f"the browser test needs Debian's chromium + chromedriver; install them: {INSTALL}")
    port = free_port()
    with (tmp_path / "chromedriver.log").open("w") as driver_log:
        process = subprocess.Popen(
            [driver, f"--port={port}", "--allowed-ips=127.0.0.1"], stdout=driver_log, stderr=subprocess.STDOUT
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                deadline = time.monotonic() + 10
                while True:
                    try:
                        if http.get("/status").json()["value"]["ready"]:
                            break
                    except httpx.TransportError:
                        pass
                    if time.monotonic() > deadline:
                        pytest.fail(f"chromedriver did not start: {(tmp_path / 'chromedriver.log').read_text()}")
                    time.sleep(0.05)
                options = {"binary": CHROMIUM, "args": [*CHROME_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]}
                created = http.post(
                    "/session",
                    json={"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}},
                )
                assert created.status_code == 200, created.text
                session_id = created.json()["value"]["sessionId"]
                try:
                    yield Browser(http, session_id)
                finally:
                    http.delete(f"/session/{session_id}")
        finally:
            process.terminate()
            process.wait(timeout=10)


def test_page_streams_the_answer_shows_the_tool_call_and_resumes_after_approve(
    serve: Callable[[Any], Any], browser: Browser
) -> None:
    example = load_example()
    server = serve(example.create_app())

    browser.open(server.base_url + "/")
    browser.click("#send")

    browser.wait_for("return document.querySelector('#log button.decision-approve') !== null")
    shown = browser.js("return document.getElementById('log').innerText")
    assert "Ich schreibe Anna eine kurze Mail zum Termin." in shown
    assert "[tool start] send_mail" in shown
    assert "anna@example.com" in shown
    assert "Send this mail?" in shown
    assert browser.js("return document.querySelector('#log button.decision-approve').innerText") == "Approve"
    assert example.OUTBOX == []  # nothing is sent before the human approves

    browser.click("#log button.decision-approve")

    browser.wait_for("return document.getElementById('log').innerText.includes('verschickt.')")
    shown = browser.js("return document.getElementById('log').innerText")
    assert "[tool end] send_mail Mail to anna@example.com sent." in shown
    assert shown.index("[tool end]") < shown.index("Erledigt: die Mail an Anna ist verschickt.")
    assert example.OUTBOX == [{"to": "anna@example.com", "subject": "Termin", "body": "Passt Dienstag um 10?"}]


def test_the_example_signs_in_keeps_threads_to_their_user_and_speaks_three_protocols(
    serve: Callable[[Any], Any],
) -> None:
    example = load_example()
    server = serve(example.create_app())
    with (
        httpx.Client(base_url=server.base_url, timeout=30) as anna,
        httpx.Client(base_url=server.base_url, timeout=30) as ben,
    ):
        anna.get("/")
        ben.get("/")  # each browser gets its own signed demo user
        started = anna.post("/agent", json={"input": "Schreib Anna.", "thread_id": "t-anna"})
        assert started.status_code == 200 and '"kind":"interrupt"' in started.text
        answers = {
            "another user's thread": ben.post("/agent", json={"thread_id": "t-anna", "decision": "approve"}),
            "no sign-in": httpx.post(f"{server.base_url}/agent", json={"input": "Hi"}),
            "a body that is not JSON": anna.post("/agent", content=b"{", headers={"content-type": "application/json"}),
            "an unknown route": anna.get("/chat"),
        }
        ag_ui = anna.post(
            "/ag-ui",
            json={"threadId": "t-ag", "runId": "r-1", "messages": [{"id": "u-1", "role": "user", "content": "Hi"}]},
        )
        vercel = anna.post(
            "/vercel-ai",
            json={
                "id": "chat-1",
                "messages": [{"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}],
            },
        )
    assert {name: r.status_code for name, r in answers.items()} == {
        "another user's thread": 404,
        "no sign-in": 401,
        "a body that is not JSON": 400,
        "an unknown route": 404,
    }
    for response in answers.values():
        assert response.headers["content-type"] == "application/json" and response.json()["kind"] == "error"
    assert example.OUTBOX == []  # ben's approval ran nothing
    assert ag_ui.headers["content-type"].startswith("text/event-stream") and '"type":"RUN_STARTED"' in ag_ui.text
    assert vercel.headers["x-vercel-ai-ui-message-stream"] == "v1" and vercel.text.endswith("data: [DONE]\n\n")
