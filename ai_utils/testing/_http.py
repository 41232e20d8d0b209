"""`LocalHTTPServer`: a stdlib HTTP server on a free 127.0.0.1 port, in a daemon thread, for the fake servers.

Subclasses implement `handle(handler, raw_body) -> (status, body, headers)` (or ``None``: hang up without
a reply); this class owns the socket, the thread, keep-alive connections (dropped on `stop`), single-write
responses, the ``with`` block, the queue of canned replies (``fail(...)``: `Canned`) and request decoding.
`FakeJevServer` and `FakeOpenAIServer` both build on it.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = ["Canned", "LocalHTTPServer", "decode_request", "dumps"]


def dumps(value: Any) -> bytes:
    """Compact JSON bytes, as the real APIs send them."""
    return json.dumps(value, separators=(",", ":")).encode()


def decode_request(handler: BaseHTTPRequestHandler, raw: bytes) -> tuple[dict[str, str], Any]:
    """The request's headers (lower-cased names) and its JSON body (``None`` when empty or not JSON)."""
    headers = {key.lower(): value for key, value in handler.headers.items()}
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    return headers, body


@dataclasses.dataclass
class Canned:
    """A reply sent as it is to the next ``times`` requests, before any rule is asked."""

    status: int
    body: bytes
    headers: dict[str, str]
    times: int

    def reply(self) -> tuple[int, bytes, dict[str, str]]:
        """``(status, body, headers)`` for `LocalHTTPServer.handle` (JSON unless the headers say otherwise)."""
        return self.status, self.body, {"Content-Type": "application/json", **self.headers}


class LocalHTTPServer:
    """Lifecycle of a fake server: `start` (idempotent), `stop`, `port`, and ``with server: ...``."""

    def __init__(self, *, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._canned: list[Canned] = []

    def handle(self, handler: BaseHTTPRequestHandler, raw: bytes) -> tuple[int, bytes, dict[str, str]] | None:
        """Answer one request: ``(status, body, extra headers)``, or ``None`` to hang up without a reply."""
        raise NotImplementedError

    def _can(self, status: int, body: Any, headers: dict[str, str], times: int) -> None:
        """Queue a `Canned` reply; ``body`` is sent as is (bytes), encoded (text) or as compact JSON."""
        data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else dumps(body))
        with self._lock:
            self._canned.append(Canned(status, data, headers, times))

    def _take_canned(self) -> Canned | None:
        """The canned reply for this request, counted down, if one is queued; call it with ``_lock`` held."""
        canned = self._canned[0] if self._canned else None
        if canned is not None:
            canned.times -= 1
            if canned.times <= 0:
                self._canned.pop(0)
        return canned

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> Self:
        """Start serving on a free port of 127.0.0.1 (idempotent)."""
        if self._httpd is None:
            httpd = _Server(("127.0.0.1", 0), _make_handler(self))
            self._httpd = httpd
            self._thread = threading.Thread(
                target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=self._name, daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop open connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._httpd is None:
            raise RuntimeError(f"{self._name} is not running; call start() or use it in a `with` block.")
        return int(self._httpd.server_address[1])


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default 5 drops SYNs under 10+ concurrent connects (1 s retransmit)


def _make_handler(server: LocalHTTPServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            with server._lock:
                server._connections.add(self.connection)

        def finish(self) -> None:
            with server._lock:
                server._connections.discard(self.connection)
            try:
                super().finish()
            except OSError:
                pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                outcome = server.handle(self, raw)
            except Exception as exc:  # a broken test rule must show up as a reply, not a hung client
                message = f"{type(server).__name__} error: {type(exc).__name__}: {exc}"
                outcome = 500, json.dumps({"error": {"message": message}}).encode(), {}
            if outcome is None:
                self.close_connection = True
                return
            status, data, headers = outcome
            self._send(status, data, {"Content-Type": "application/json", **headers})

        do_POST = _answer
        do_GET = _answer

        def _send(self, status: int, data: bytes, headers: Mapping[str, str]) -> None:
            lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('Error',))[0]}"]
            lines += [f"{key}: {value}" for key, value in headers.items()]
            lines += [f"Content-Length: {len(data)}", "", ""]
            # One write: a separate body write would meet Nagle + delayed ACK (40 ms) on some stacks.
            self.wfile.write("\r\n".join(lines).encode("latin-1") + data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
