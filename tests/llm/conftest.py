from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _provider_servers.fixtures import anthropic_server as anthropic_server
from _provider_servers.fixtures import deepseek_server as deepseek_server
from _provider_servers.fixtures import gemini_server as gemini_server
from _provider_servers.fixtures import responses_server as responses_server


@dataclass
class FakeCLI:
    """A stand-in CLI executable that records how it was called and prints a canned reply."""

    path: Path
    record: Path

    def calls(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    @property
    def argv(self) -> list[str]:
        return list(self.calls()[-1]["argv"])

    @property
    def stdin(self) -> str:
        return str(self.calls()[-1]["stdin"])


_SCRIPT = """#!{python}
import json, sys, time
data = sys.stdin.read()
with open({record!r}, "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "stdin": data}}) + "\\n")
streaming = "stream-json" in sys.argv
out = {stream_out!r} if streaming else {out!r}
for line in out.splitlines(keepends=True):
    sys.stdout.write(line)
    sys.stdout.flush()
sys.stderr.write({stderr!r})
time.sleep({sleep!r})
sys.exit({exit_code!r})
"""


@pytest.fixture
def fake_cli(tmp_path: Path) -> Callable[..., FakeCLI]:
    """Write an executable Python script standing in for `claude` / `codex`."""

    def make(
        name: str,
        *,
        stdout: str,
        stream_stdout: str | None = None,
        stderr: str = "",
        exit_code: int = 0,
        sleep: float = 0.0,
    ) -> FakeCLI:
        record = tmp_path / f"{name}.calls.jsonl"
        path = tmp_path / name
        path.write_text(
            _SCRIPT.format(
                python=sys.executable,
                record=str(record),
                out=stdout,
                stream_out=stdout if stream_stdout is None else stream_stdout,
                stderr=stderr,
                sleep=sleep,
                exit_code=exit_code,
            )
        )
        path.chmod(0o755)
        return FakeCLI(path=path, record=record)

    return make


@dataclass
class StubOpenRouter:
    """A tiny OpenRouter stand-in: ``GET /models`` serves a crafted list, chat completions echo the model."""

    base_url: str
    models: list[dict[str, Any]]
    model_requests: int = 0
    chat_bodies: list[dict[str, Any]] = field(default_factory=list)
    models_status: int = 200
    models_raw: bytes | None = None
    stream_deltas: list[dict[str, Any]] = field(default_factory=list)
    message_extra: dict[str, Any] = field(default_factory=dict)


@pytest.fixture
def stub_openrouter() -> Iterator[StubOpenRouter]:
    state = StubOpenRouter(base_url="", models=[])

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: Any, raw: bytes | None = None) -> None:
            body = json.dumps(payload).encode() if raw is None else raw
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.endswith("/models"):
                state.model_requests += 1
                self._send(state.models_status, {"data": state.models}, state.models_raw)
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.chat_bodies.append(body)
            if body.get("stream"):
                self._stream(body["model"])
                return
            self._send(
                200,
                {
                    "id": "gen-1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": f"hi from {body['model']}",
                                **state.message_extra,
                            },
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4},
                },
            )

        def _stream(self, model: str) -> None:
            # OpenRouter's SSE shape: every chunk repeats id/model/provider; a final chunk has finish_reason.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            deltas = [*state.stream_deltas, {}]
            for i, delta in enumerate(deltas):
                finish = "stop" if i == len(deltas) - 1 else None
                chunk = {
                    "id": "gen-1",
                    "provider": "OpenAI",
                    "model": model,
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "native_finish_reason": finish}],
                }
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/api/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
