"""`ProviderServer`: the scripting, journal and failure queue every fake provider server shares.

A subclass speaks one provider's wire format: it parses the request (`_route`), decides which scripted
`Reply` answers it (`pick`) and renders that reply as the provider's JSON or SSE body. Replies, failures and
the journal work the same for every provider, so a test reads the same whichever provider it drives.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ai_utils.testing._http import LocalHTTPServer, decode_request, dumps

__all__ = ["ProviderServer", "RecordedCall", "Reply", "ReplyFunction", "ToolCall", "sse", "words"]


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """A tool call the model makes: its name and arguments."""

    name: str
    args: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Reply:
    """What the fake model answers, in provider-neutral form; each server renders it in its own format.

    Attributes:
        text: the answer text (streamed word by word).
        tool_calls: tool calls after the text.
        thinking: reasoning text (providers that have a reasoning channel send it first).
        input_tokens: uncached prompt tokens reported (``None``: the number of words in the request).
        cache_read: prompt tokens served from the provider's cache.
        cache_creation: prompt tokens written to the cache (Anthropic only).
        model: the model name the reply reports (default: the request's).
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    thinking: str = ""
    input_tokens: int | None = None
    cache_read: int = 0
    cache_creation: int = 0
    model: str | None = None

    @property
    def output_tokens(self) -> int:
        """A made-up but stable count: words of the text plus one per tool call."""
        return len(words(self.text)) + len(self.tool_calls)


ReplyFunction = Callable[["RecordedCall"], "Reply | str | None"]
"""``fn(call) -> reply``: decide a reply from the recorded request; ``None`` falls through to the rules."""


@dataclasses.dataclass(frozen=True)
class RecordedCall:
    """One request the server received.

    Attributes:
        method: ``"POST"`` / ``"GET"``.
        path: the URL path.
        query: the query parameters (last value per name).
        headers: lower-cased header names -> values.
        body: the parsed JSON body (``None`` when not JSON).
        text: every text the request's messages carry, joined by newlines (what ``when=`` matches).
        model: the requested model.
        stream: whether the request asked for a stream.
    """

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    text: str = ""
    model: str = ""
    stream: bool = False


@dataclasses.dataclass
class _Rule:
    reply: Reply
    when: str | None
    times: int | None


def words(text: str) -> list[str]:
    """Split text into stream pieces that join back to it: each word keeps its trailing spaces."""
    pieces: list[str] = []
    for part in text.split(" "):
        if pieces and not part:
            pieces[-1] += " "
        elif part:
            pieces.append(part + " ")
    if pieces and not text.endswith(" "):
        pieces[-1] = pieces[-1][:-1]
    return pieces


def sse(events: Sequence[tuple[str | None, Any]], *, done: str | None = None) -> bytes:
    """An SSE body: ``event:`` lines when a name is given, compact JSON ``data:`` lines, a blank line after each."""
    out: list[str] = []
    for name, data in events:
        if name is not None:
            out.append(f"event: {name}\n")
        out.append(f"data: {json.dumps(data, separators=(',', ':'))}\n\n")
    if done is not None:
        out.append(f"data: {done}\n\n")
    return "".join(out).encode()


class ProviderServer(LocalHTTPServer):
    """A fake provider on 127.0.0.1: scripted replies (`reply`, `reply_with`), failures (`fail`), a journal.

    Replies come from `reply_with`'s function, then from the rules (``when=`` rules first, then the others, each in
    the order added). Without a match the answer is ``"ok"``. Failures are served first, in order, before the key
    is checked.

    Args:
        name: the server thread's name.
        api_key: the key requests must carry; ``None`` accepts any.
    """

    def __init__(self, *, name: str, api_key: str | None) -> None:
        super().__init__(name=name)
        self.api_key = api_key
        self._rules: list[_Rule] = []
        self._fn: ReplyFunction | None = None
        self._calls: list[RecordedCall] = []
        self._ids = itertools.count(1)

    # -- to implement -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL to hand the SDK / `get_llm`."""
        raise NotImplementedError

    def _route(self, call: RecordedCall) -> tuple[int, bytes, dict[str, str]]:
        """Answer an authenticated request in the provider's format."""
        raise NotImplementedError

    def _key_of(self, headers: Mapping[str, str]) -> str | None:
        """The API key the request carries."""
        raise NotImplementedError

    def _error(self, status: int, message: str) -> tuple[int, bytes, dict[str, str]]:
        """An error reply in the provider's error shape."""
        raise NotImplementedError

    def _describe(self, body: Any, path: str) -> tuple[str, str, bool]:
        """``(text, model, stream)`` of a request, for the journal."""
        raise NotImplementedError

    # -- scripting ----------------------------------------------------------------------------------------

    def reply(
        self,
        text: str = "ok",
        *,
        tool_calls: Sequence[Mapping[str, Any]] = (),
        thinking: str = "",
        input_tokens: int | None = None,
        cache_read: int = 0,
        cache_creation: int = 0,
        model: str | None = None,
        when: str | None = None,
        times: int | None = None,
    ) -> None:
        """Add a reply rule (``tool_calls``: ``[{"name", "args"}]``); see `Reply` for the fields."""
        reply = Reply(
            text=text,
            tool_calls=tuple(ToolCall(c["name"], dict(c.get("args") or {})) for c in tool_calls),
            thinking=thinking,
            input_tokens=input_tokens,
            cache_read=cache_read,
            cache_creation=cache_creation,
            model=model,
        )
        with self._lock:
            self._rules.append(_Rule(reply, when, times))

    def reply_with(self, fn: ReplyFunction | None) -> None:
        """Decide replies with ``fn(call)`` before the rules."""
        with self._lock:
            self._fn = fn

    def fail(self, status: int, *, times: int = 1, message: str | None = None, body: Any = None) -> None:
        """Answer the next ``times`` requests with ``status`` in the provider's error shape (or ``body``)."""
        _, default_body, _ = self._error(status, message or f"Fake failure {status}")
        self._can(status, default_body if body is None else body, {}, times)

    def reset(self) -> None:
        """Forget rules, failures, the reply function and the journal."""
        with self._lock:
            self._rules.clear()
            self._canned.clear()
            self._fn = None
            self._calls.clear()

    @property
    def calls(self) -> list[RecordedCall]:
        """Every request received, in order (a copy)."""
        with self._lock:
            return list(self._calls)

    def next_id(self) -> int:
        """A fresh number for ids in replies."""
        return next(self._ids)

    # -- request handling (server threads) ------------------------------------------------------------------

    def handle(self, handler: BaseHTTPRequestHandler, raw: bytes) -> tuple[int, bytes, dict[str, str]]:
        """Journal the request, serve a queued failure, check the key, then answer it."""
        headers, body = decode_request(handler, raw)
        parts = urlsplit(handler.path)
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        text, model, stream = self._describe(body, parts.path)
        call = RecordedCall(handler.command, parts.path, query, headers, body, text, model, stream)
        with self._lock:
            self._calls.append(call)
            canned = self._take_canned()
        if canned is not None:
            return canned.reply()
        if self.api_key is not None and self._key_of(headers) != self.api_key:
            return self._error(401, "invalid x-api-key")
        return self._route(call)

    def pick(self, call: RecordedCall) -> Reply:
        """The reply for ``call``: the function, then the rules, then ``"ok"``."""
        with self._lock:
            fn = self._fn
        if fn is not None and (picked := fn(call)) is not None:
            return Reply(text=picked) if isinstance(picked, str) else picked
        with self._lock:
            ordered = [r for r in self._rules if r.when is not None] + [r for r in self._rules if r.when is None]
            for rule in ordered:
                if rule.when is not None and rule.when not in call.text:
                    continue
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times <= 0:
                        self._rules.remove(rule)
                return rule.reply
        return Reply(text="ok")

    @staticmethod
    def json_reply(payload: Any, headers: Mapping[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
        """A 200 JSON reply."""
        return 200, dumps(payload), {"Content-Type": "application/json", **(headers or {})}

    @staticmethod
    def sse_reply(body: bytes, headers: Mapping[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
        """A 200 SSE reply (sent whole; the SDKs read it event by event)."""
        return 200, body, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **(headers or {})}

    @staticmethod
    def prompt_tokens(reply: Reply, call: RecordedCall, *, with_cache: bool = True) -> int:
        """The reply's input tokens (else the words of the request), plus its cached ones when the provider
        counts them in (OpenAI, Gemini, DeepSeek do; Anthropic reports them beside ``input_tokens``)."""
        fresh = reply.input_tokens if reply.input_tokens is not None else max(1, len(call.text.split()))
        return fresh + (reply.cache_read if with_cache else 0)


class OpenAIStyleServer(ProviderServer):
    """A `ProviderServer` on OpenAI's conventions: ``base_url`` ends in ``/v1``, a bearer key, OpenAI's error shape.

    Shared by the OpenAI Responses and DeepSeek fakes (DeepSeek's API is OpenAI-compatible down to its errors).
    """

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _key_of(self, headers: Mapping[str, str]) -> str | None:
        value = headers.get("authorization") or ""
        return value.removeprefix("Bearer ") if value.startswith("Bearer ") else None

    def _error(self, status: int, message: str) -> tuple[int, bytes, dict[str, str]]:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return status, dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}), {}
