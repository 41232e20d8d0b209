"""`FakeJevServer`: a fake Jev decisions API on 127.0.0.1 that speaks the real wire protocol.

It checks what the real API checks (bearer key, JSON body, question shapes and limits), answers in
the real reply shape (OpenRouter ``POST /api/alpha/decisions`` and the ``/api/v1/systemone`` alias;
TypeSafe ``POST /v1/systemone``), deterministically from rules a test sets, and records every request.

```python
from ai_utils import classify
from ai_utils.testing import FakeJevServer

with FakeJevServer() as jev:
    jev.answer("category", choice="billing")
    result = classify("I was charged twice", questions, base_url=jev.url, api_key=jev.api_key)
    assert jev.requests[0].body["questions"]["category"]["type"] == "choice"
```

Without a rule a choice picks its first label (p = 0.9), a noul answers 0.1 and a score puts 0.9 on
level 0 and 0.1 on level 1. ``fail()``, ``reply_raw()`` and ``delay()`` script errors and slowness.
"""

from __future__ import annotations

import dataclasses
import math
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

from ai_utils.testing._http import LocalHTTPServer, decode_request
from ai_utils.testing._jev_wire import (
    RULE_KEYS,
    RuleError,
    check_body,
    choice_answer,
    dumps,
    error,
    noul_answer,
    score_answer,
)

__all__ = ["FakeJevServer", "JevAnswerFunction", "RecordedJevRequest"]

JevAnswerFunction = Callable[[str, dict[str, Any], Any], Mapping[str, Any] | None]
"""``fn(question_name, question, state) -> partial answer | None`` (None: use the default answer)."""

_PRICE_PER_INPUT_TOKEN = 0.042e-6


@dataclasses.dataclass(frozen=True)
class RecordedJevRequest:
    """One request the server received.

    Attributes:
        method: ``"POST"``.
        path: e.g. ``"/api/alpha/decisions"``.
        headers: lower-cased header names -> values.
        body: the parsed JSON body, or ``None`` when it was not JSON.
        raw: the raw body bytes.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


class FakeJevServer(LocalHTTPServer):
    """A real HTTP server on 127.0.0.1 (stdlib, in a daemon thread) that fakes Jev.

    Args:
        api_key: the bearer key requests must carry (``.api_key``).
        model_version: what ``model`` says in OpenRouter replies (the dated build of the alias you asked for).
        typesafe_model_version: the same for TypeSafe-direct replies.
    """

    def __init__(
        self,
        *,
        api_key: str = "fake-jev-key",
        model_version: str = "typesafe/jev-1.13-20260917",
        typesafe_model_version: str = "jev-1.13.0",
    ) -> None:
        self.api_key = api_key
        self.model_version = model_version
        self.typesafe_model_version = typesafe_model_version
        super().__init__(name="FakeJevServer")
        self._stopping = threading.Event()
        self._rules: dict[str, dict[str, Any]] = {}
        self._answer_fn: JevAnswerFunction | None = None
        self._delay = 0.0
        self._delay_times: int | None = None
        self._requests: list[RecordedJevRequest] = []
        self._disconnects = 0
        self._counter = 0

    # -- lifecycle (sockets, thread and ``with`` block: LocalHTTPServer) ---------------------------

    def start(self) -> Self:
        """Start serving on a free port of 127.0.0.1 (idempotent)."""
        self._stopping.clear()
        return super().start()

    def stop(self) -> None:
        """Stop serving and drop open connections (a delayed reply in flight hangs up at once)."""
        self._stopping.set()
        super().stop()

    @property
    def url(self) -> str:
        """The OpenRouter-style API root to pass as ``base_url`` (requests go to ``{url}/alpha/decisions``)."""
        return f"http://127.0.0.1:{self.port}/api"

    @property
    def typesafe_url(self) -> str:
        """The TypeSafe-style API root for ``provider="typesafe"`` (requests go to ``{url}/v1/systemone``)."""
        return f"http://127.0.0.1:{self.port}"

    # -- scripting -------------------------------------------------------------------------------

    def answer(
        self,
        name: str,
        *,
        choice: str | None = None,
        probabilities: Mapping[Any, float] | None = None,
        noul: float | None = None,
        score: float | None = None,
        confidence: float | None = None,
    ) -> None:
        """Fix the answer to question ``name`` (until `reset`); unset parts are derived like the real API does.

        Args:
            name: the question id.
            choice: a choice's label (p = 0.9, the rest share 0.1).
            probabilities: a choice's label -> p, or a score's level -> p.
            noul: P(yes) for a noul.
            score: a score's expected level, e.g. 1.7 (split between levels 1 and 2).
            confidence: a choice's confidence (default: computed from the probabilities).
        """
        fields = {"choice": choice, "probabilities": probabilities, "noul": noul, "score": score}
        fields["confidence"] = confidence
        with self._lock:
            self._rules[name] = {key: value for key, value in fields.items() if value is not None}

    def answer_with(self, fn: JevAnswerFunction | None) -> None:
        """Decide answers with ``fn(question_name, question, state)``; it returns a partial answer or None.

        A returned mapping with a ``"type"`` key is sent verbatim (to fake malformed answers).
        """
        with self._lock:
            self._answer_fn = fn

    def fail(
        self,
        status: int = 500,
        *,
        times: int = 1,
        retry_after: float | str | None = None,
        retry_after_ms: float | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer the next ``times`` requests with ``status`` and an OpenRouter error body (or ``body``)."""
        all_headers = dict(headers or {})
        if retry_after is not None:
            all_headers["Retry-After"] = str(retry_after)
        if retry_after_ms is not None:
            all_headers["Retry-After-Ms"] = str(retry_after_ms)
        if body is None:
            body = {"error": {"code": status, "message": f"Fake failure {status}"}}
        self._can(status, body, all_headers, times)

    def reply_raw(
        self, body: str | bytes, *, status: int = 200, times: int = 1, content_type: str = "application/json"
    ) -> None:
        """Answer the next ``times`` requests with exactly ``body`` (e.g. malformed JSON)."""
        self._can(status, body, {"Content-Type": content_type}, times)

    def delay(self, seconds: float, *, times: int | None = None) -> None:
        """Wait ``seconds`` before answering the next ``times`` requests (``None``: every request)."""
        with self._lock:
            self._delay = seconds
            self._delay_times = times

    def reset(self) -> None:
        """Forget rules, scripted failures, delays and recorded requests."""
        with self._lock:
            self._rules.clear()
            self._answer_fn = None
            self._canned.clear()
            self._delay, self._delay_times = 0.0, None
            self._requests.clear()
            self._disconnects = 0

    @property
    def requests(self) -> list[RecordedJevRequest]:
        """Every request received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def disconnects(self) -> int:
        """How many clients hung up while the server was still delaying its answer (e.g. a cancelled task)."""
        with self._lock:
            return self._disconnects

    # -- request handling (runs in server threads) ----------------------------------------------

    def handle(self, handler: BaseHTTPRequestHandler, raw: bytes) -> tuple[int, bytes, dict[str, str]] | None:
        """Answer one request the way the Jev API would (``None``: hang up, as for a client that left)."""
        if handler.command != "POST":
            return error("openrouter", 404, f"No route for {handler.command} {handler.path}")
        headers, body = decode_request(handler, raw)
        with self._lock:
            self._requests.append(RecordedJevRequest(handler.command, handler.path, headers, body, raw))
            self._counter += 1
            number = self._counter
            delay = self._delay
            if self._delay_times is not None:
                self._delay_times -= 1
                if self._delay_times <= 0:
                    self._delay, self._delay_times = 0.0, None
        if delay > 0 and not self._wait(handler.connection, delay):
            with self._lock:
                self._disconnects += 1
            return None
        with self._lock:
            canned = self._take_canned()
        if canned is not None:
            return canned.reply()
        return self._decide(handler.path, headers, raw, body, number)

    def _wait(self, conn: socket.socket, seconds: float) -> bool:
        """Sleep ``seconds``; return False as soon as the client hangs up."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not self._stopping.is_set():
            readable, _, _ = select.select([conn], [], [], min(left, 0.02))
            if readable:
                try:
                    if not conn.recv(1, socket.MSG_PEEK):
                        return False
                except OSError:
                    return False
                time.sleep(min(left, 0.02))
        return not self._stopping.is_set()

    def _decide(
        self, path: str, headers: dict[str, str], raw: bytes, body: Any, number: int
    ) -> tuple[int, bytes, dict[str, str]]:
        if path in ("/api/alpha/decisions", "/api/v1/systemone"):
            dialect = "openrouter"
        elif path == "/v1/systemone":
            dialect = "typesafe"
        else:
            return error("openrouter", 404, f"No route for POST {path}")
        if headers.get("authorization") != f"Bearer {self.api_key}":
            if dialect == "typesafe":
                detail = {"error_type": "authentication_error", "message": "Invalid API key"}
                return 401, dumps({"detail": detail}), {"Content-Type": "application/json"}
            return error(dialect, 401, "No auth credentials found")
        if not headers.get("content-type", "").startswith("application/json"):
            return error(dialect, 400, "Content-Type must be application/json")
        if not isinstance(body, dict):
            return error(dialect, 400, "The request body is not a JSON object")
        problem = check_body(body, dialect, alias=path == "/api/v1/systemone")
        if problem is not None:
            status, message = problem
            return error(dialect, status, message)
        try:
            answers = {
                name: self._answer(name, question, body["state"]) for name, question in body["questions"].items()
            }
        except RuleError as exc:
            return error(dialect, 500, f"FakeJevServer rule error: {exc}")
        input_tokens = math.ceil(len(raw) / 4) + 270
        usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": 24 * len(answers)}
        if dialect == "typesafe":
            reply = {"model": self.typesafe_model_version, "answers": answers, "usage": usage}
            return (
                200,
                dumps(reply),
                {"Content-Type": "application/json", "x-typesafe-request-id": f"req_fake{number}"},
            )
        usage["cost"] = round(input_tokens * _PRICE_PER_INPUT_TOKEN, 12)
        reply = {
            "model": self.model_version,
            "answers": answers,
            "usage": usage,
            "id": f"gen-dec-{number}-FakeJevServer",
            "provider": "TypeSafe",
        }
        return 200, dumps(reply), {"Content-Type": "application/json"}

    def _answer(self, name: str, question: dict[str, Any], state: Any) -> dict[str, Any]:
        with self._lock:
            rule: Mapping[str, Any] | None = self._rules.get(name)
            fn = self._answer_fn
        if fn is not None:
            rule = fn(name, question, state) or rule
        rule = dict(rule or {})
        if "type" in rule:
            return rule
        kind = question["type"]
        unknown = set(rule) - RULE_KEYS[kind]
        if unknown:
            raise RuleError(f"question {name!r} is a {kind}; the rule sets {sorted(unknown)!r}")
        if kind == "choice":
            return choice_answer(name, list(question["criteria"]), rule)
        if kind == "noul":
            return noul_answer(name, rule)
        return score_answer(name, list(question["criteria"]), rule)
