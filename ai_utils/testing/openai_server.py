"""`FakeOpenAIServer`: an OpenAI-compatible Chat Completions server on 127.0.0.1 for tests and offline demos.

It speaks the real wire shape (``POST /v1/chat/completions``, also under ``/api/v1`` like OpenRouter):
bearer key, ``choices[0].message``, ``usage``, and the two parts other fakes lack: token
``logprobs`` with ``top_logprobs`` (what ``classify(..., llm=...)`` reads) and OpenRouter's
``message.images`` (what `generate_images` decodes). Every request lands in a journal.

```python
from ai_utils import classify, get_llm
from ai_utils.testing import FakeOpenAIServer

questions = {"team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": None, "tech": None}}}
with FakeOpenAIServer() as server:
    server.reply("A", logprobs={"A": -0.1, "B": -2.5}, when="Which team")
    llm = get_llm("local", "fake-gpt", base_url=server.url, api_key=server.api_key)
    result = classify("I was charged twice", questions, llm=llm)
    assert result.answers["team"].choice == "billing"
    assert server.requests[0].body["logprobs"] is True
```

Why not aimock (the suite's other fake): it always answers ``"logprobs": null`` and has no ``images``.
Why the standard library and not Starlette: `ai_utils.testing` must work with no extras installed,
like `FakeJevServer`.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from ai_utils.exceptions import UserError
from ai_utils.testing._http import LocalHTTPServer, decode_request, dumps
from ai_utils.testing._logprobs import check_logprobs, token_logprobs

__all__ = ["FakeOpenAIServer", "OpenAIReplyFunction", "RecordedRequest"]

OpenAIReplyFunction = Callable[[dict[str, Any]], Mapping[str, Any] | str | None]
"""``fn(request_body) -> reply | None``: a reply is text or ``{"content", "logprobs", "images", "model"}``."""

_CHAT_PATHS = frozenset({"/v1/chat/completions", "/api/v1/chat/completions", "/chat/completions"})
_MODELS_PATHS = frozenset({"/v1/models", "/api/v1/models", "/models"})
_REPLY_KEYS = frozenset({"content", "logprobs", "images", "model"})
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"))


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    """One request the server received.

    Attributes:
        method: e.g. ``"POST"``.
        path: e.g. ``"/v1/chat/completions"``.
        headers: lower-cased header names -> values.
        body: the parsed JSON body, or ``None`` when it was not JSON.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def text(self) -> str:
        """All text of the request's messages, joined by newlines (what ``when=`` rules match)."""
        return _messages_text(self.body)


@dataclasses.dataclass
class _Rule:
    reply: dict[str, Any]
    when: str | None
    times: int | None


class FakeOpenAIServer(LocalHTTPServer):
    """A real HTTP server on 127.0.0.1 that fakes an OpenAI-compatible provider (OpenAI, OpenRouter, vLLM, ...).

    Replies come from `reply_with`'s function, then from the `reply` rules: rules with ``when=`` first, then the
    others, each group in the order added; the first that matches answers. Without one the answer is ``"ok"``.
    Failures (`fail`) are served first, in order. With ``logprobs=False`` the server behaves like a provider
    that ignores the ``logprobs`` request field (``"logprobs": null``).

    Args:
        api_key: the bearer key requests must carry (``.api_key``); ``None`` accepts any.
        model: the model name replies report (the request's ``model`` is echoed when this is ``None``).
        logprobs: whether the server honours ``logprobs`` / ``top_logprobs``.
    """

    def __init__(self, *, api_key: str | None = "fake-openai-key", model: str | None = None, logprobs: bool = True):
        super().__init__(name="FakeOpenAIServer")
        self.api_key = api_key
        self.model = model
        self.logprobs = logprobs
        self._rules: list[_Rule] = []
        self._fn: OpenAIReplyFunction | None = None
        self._requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        """The API root to pass as ``base_url`` (``http://127.0.0.1:<port>/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -------------------------------------------------------------------------------

    def reply(
        self,
        content: str = "ok",
        *,
        logprobs: Mapping[str, float] | None = None,
        images: Sequence[bytes | str] = (),
        when: str | None = None,
        times: int | None = None,
        model: str | None = None,
    ) -> None:
        """Add a reply rule (kept until `reset`, or for ``times`` requests).

        Args:
            content: the assistant text.
            logprobs: token -> log-probability at the first answer position; sent (best first, cut to the
                request's ``top_logprobs``) as ``choices[0].logprobs.content[0].top_logprobs`` when the
                request asks for logprobs. ``content`` is the sampled token.
            images: images for ``message.images``: raw bytes (sent as a base64 data URL) or URLs.
            when: only for requests whose message text contains this string.
            times: how many requests the rule answers (``None``: all).
            model: the model name this reply reports.
        """
        if logprobs is not None and (problem := check_logprobs(logprobs, where="logprobs")):
            raise UserError(problem)
        rule = {"content": content, "logprobs": dict(logprobs) if logprobs else None, "images": list(images)}
        if model is not None:
            rule["model"] = model
        with self._lock:
            self._rules.append(_Rule(rule, when, times))

    def reply_with(self, fn: OpenAIReplyFunction | None) -> None:
        """Decide replies with ``fn(request_body)`` before the rules; ``None`` from it falls through to them."""
        with self._lock:
            self._fn = fn

    def fail(
        self, status: int = 500, *, times: int = 1, body: Any = None, retry_after: float | str | None = None
    ) -> None:
        """Answer the next ``times`` requests with ``status`` and an OpenAI error body (or ``body``)."""
        if body is None:
            body = {"error": {"message": f"Fake failure {status}", "type": "server_error", "code": status}}
        self._can(status, body, {} if retry_after is None else {"Retry-After": str(retry_after)}, times)

    def reset(self) -> None:
        """Forget rules, failures, the reply function and the journal."""
        with self._lock:
            self._rules.clear()
            self._canned.clear()
            self._fn = None
            self._requests.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    # -- request handling (server threads) ---------------------------------------------------------

    def handle(self, handler: BaseHTTPRequestHandler, raw: bytes) -> tuple[int, bytes, dict[str, str]]:
        """Answer one request (called by the server thread)."""
        headers, body = decode_request(handler, raw)
        path = handler.path.split("?", 1)[0]
        with self._lock:
            self._requests.append(RecordedRequest(handler.command, path, headers, body))
            canned = self._take_canned()
        if canned is not None:
            return canned.reply()
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided.", "invalid_request_error")
        if handler.command == "GET" and path in _MODELS_PATHS:
            return 200, dumps({"object": "list", "data": [{"id": self.model or "fake-gpt", "object": "model"}]}), {}
        if handler.command != "POST" or path not in _CHAT_PATHS:
            return _error(404, f"No route for {handler.command} {path}", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "The body must be a JSON object with a non-empty `messages` list.", "invalid_request")
        if body.get("stream"):
            return _error(400, "FakeOpenAIServer does not stream; call without stream=True.", "invalid_request")
        return 200, dumps(self._completion(body)), {}

    def _pick(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            fn = self._fn
        if fn is not None and (picked := fn(body)) is not None:
            reply = {"content": picked} if isinstance(picked, str) else dict(picked)
            unknown = set(reply) - _REPLY_KEYS
            if unknown:
                raise ValueError(f"reply_with() returned unknown keys {sorted(unknown)!r}")
            return reply
        text = _messages_text(body)
        with self._lock:
            # Rules with `when` go first, so a catch-all added earlier never shadows a specific rule.
            ordered = [rule for rule in self._rules if rule.when is not None] + [
                rule for rule in self._rules if rule.when is None
            ]
            for rule in ordered:
                if rule.when is not None and rule.when not in text:
                    continue
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times <= 0:
                        self._rules.remove(rule)
                return rule.reply
        return {"content": "ok"}

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        reply = self._pick(body)
        content = str(reply.get("content") or "")
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        pieces = _pieces(content)
        finish = "stop"
        if isinstance(limit, int) and len(pieces) > limit:
            pieces, finish = pieces[:limit], "length"
            content = "".join(pieces)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        images = [_image_part(image) for image in reply.get("images") or ()]
        if images:
            message["images"] = images
        logprobs = None
        if self.logprobs and body.get("logprobs"):
            logprobs = {"content": token_logprobs(pieces, reply.get("logprobs"), int(body.get("top_logprobs") or 0))}
        prompt_tokens = max(1, len(_messages_text(body).split()))
        return {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.get("model") or self.model or body.get("model") or "fake-gpt",
            "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(pieces),
                "total_tokens": prompt_tokens + len(pieces),
            },
        }


def _error(status: int, message: str, kind: str) -> tuple[int, bytes, dict[str, str]]:
    return status, dumps({"error": {"message": message, "type": kind, "code": status}}), {}


def _messages_text(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    texts: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(
                part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
    return "\n".join(texts)


def _pieces(text: str) -> list[str]:
    """Split text into fake tokens: words with their trailing whitespace."""
    pieces: list[str] = []
    for word in text.split(" "):
        if pieces and not word:
            pieces[-1] += " "
        elif word:
            pieces.append(word + " ")
    if pieces and not text.endswith(" "):
        pieces[-1] = pieces[-1][:-1]
    return pieces


def _image_part(image: bytes | str) -> dict[str, Any]:
    if isinstance(image, str):
        url = image
    else:
        mime = next((m for magic, m in _MAGIC if image.startswith(magic)), "application/octet-stream")
        if image[:4] == b"RIFF" and image[8:12] == b"WEBP":
            mime = "image/webp"
        url = f"data:{mime};base64,{base64.b64encode(image).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}
