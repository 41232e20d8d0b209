"""`FakeGeminiServer`: the Gemini Developer API ``generateContent`` / ``streamGenerateContent`` (SSE).

Written from ``google-genai``'s own models (``types.GenerateContentResponse``, ``Candidate``, ``Part``,
``FunctionCall``, ``GenerateContentResponseUsageMetadata``, camelCase on the wire) and checked with
``google.genai.Client(http_options={"base_url": ...})`` in tests/llm/test_provider_servers.py:

- ``POST /v1beta/models/{model}:generateContent`` (or ``/v1/...``, which this SDK generation uses) and
  ``:streamGenerateContent?alt=sse``, key ``x-goog-api-key``;
- body ``contents`` (required; parts ``text`` / ``functionCall`` / ``functionResponse``), ``systemInstruction``,
  ``tools[].functionDeclarations``, ``generationConfig``;
- reply ``{"candidates": [{"content": {"role": "model", "parts": [...]}, "finishReason", "index"}],
  "usageMetadata": {promptTokenCount, candidatesTokenCount, totalTokenCount, cachedContentTokenCount},
  "modelVersion", "responseId"}``; function calls come whole (Gemini does not stream arguments);
- stream: ``data: <GenerateContentResponse>`` events with cumulative usage, ``finishReason`` on the last;
- errors ``{"error": {"code", "message", "status"}}`` (503 ``UNAVAILABLE``, 400 ``INVALID_ARGUMENT``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from _provider_servers._base import ProviderServer, RecordedCall, Reply, sse, words
from ai_utils.testing._http import dumps

__all__ = ["FakeGeminiServer"]

_PATH = re.compile(
    r"^/(?P<version>v1beta|v1)/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def _part_texts(parts: Any) -> list[str]:
    texts: list[str] = []
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str) and not part.get("thought"):
            texts.append(part["text"])
        elif isinstance(part.get("functionResponse"), dict):
            texts.append(json.dumps(part["functionResponse"].get("response"), sort_keys=True))
    return texts


class FakeGeminiServer(ProviderServer):
    """A fake Gemini API on 127.0.0.1 (see the module docstring); ``url`` is the SDK's ``base_url``."""

    def __init__(self, *, api_key: str | None = "fake-google-key") -> None:
        super().__init__(name="FakeGeminiServer", api_key=api_key)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (the SDK appends ``/v1beta/models/...``)."""
        return f"http://127.0.0.1:{self.port}"

    def _key_of(self, headers: Mapping[str, str]) -> str | None:
        return headers.get("x-goog-api-key")

    def _error(self, status: int, message: str) -> tuple[int, bytes, dict[str, str]]:
        payload = {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}
        return status, dumps(payload), {}

    def _describe(self, body: Any, path: str) -> tuple[str, str, bool]:
        match = _PATH.match(path)
        model = match["model"] if match else ""
        stream = bool(match and match["method"] == "streamGenerateContent")
        if not isinstance(body, dict):
            return "", model, stream
        texts = _part_texts((body.get("systemInstruction") or {}).get("parts"))
        for content in body.get("contents") or []:
            if isinstance(content, dict):
                texts.extend(_part_texts(content.get("parts")))
        return "\n".join(texts), model, stream

    def _route(self, call: RecordedCall) -> tuple[int, bytes, dict[str, str]]:
        match = _PATH.match(call.path)
        if call.method != "POST" or match is None:
            return self._error(404, f"No route for {call.method} {call.path}")
        if call.stream and call.query.get("alt") != "sse":
            return self._error(400, "FakeGeminiServer streams only as SSE (?alt=sse).")
        body = call.body
        if not isinstance(body, dict) or not isinstance(body.get("contents"), list) or not body["contents"]:
            return self._error(400, "* GenerateContentRequest.contents: contents is not specified")
        for content in body["contents"]:
            if not isinstance(content, dict) or not content.get("parts"):
                return self._error(400, "* GenerateContentRequest.contents.parts: contents.parts must not be empty.")
        reply = self.pick(call)
        number = self.next_id()
        if call.stream:
            return self.sse_reply(self._events(reply, call, number))
        return self.json_reply(self._response(reply, call, number, self._parts(reply), reply.output_tokens, True))

    @staticmethod
    def _parts(reply: Reply) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if reply.thinking:
            parts.append({"text": reply.thinking, "thought": True})
        if reply.text:
            parts.append({"text": reply.text})
        parts.extend({"functionCall": {"name": c.name, "args": dict(c.args)}} for c in reply.tool_calls)
        return parts

    def _response(
        self, reply: Reply, call: RecordedCall, number: int, parts: list[dict[str, Any]], output: int, last: bool
    ) -> dict[str, Any]:
        prompt = self.prompt_tokens(reply, call)
        usage: dict[str, Any] = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": output,
            "totalTokenCount": prompt + output,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
        }
        if reply.cache_read:
            usage["cachedContentTokenCount"] = reply.cache_read
            usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": reply.cache_read}]
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if last:
            candidate["finishReason"] = "STOP"
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": reply.model or call.model,
            "responseId": f"fake-response-{number:04d}",
        }

    def _events(self, reply: Reply, call: RecordedCall, number: int) -> bytes:
        chunks: list[list[dict[str, Any]]] = []
        if reply.thinking:
            chunks.append([{"text": reply.thinking, "thought": True}])
        chunks.extend([{"text": piece}] for piece in words(reply.text))
        if reply.tool_calls:
            chunks.append([{"functionCall": {"name": c.name, "args": dict(c.args)}} for c in reply.tool_calls])
        if not chunks:
            chunks.append([{"text": ""}])
        events: list[tuple[str | None, Any]] = []
        sent = 0
        for position, parts in enumerate(chunks):
            sent += sum(len(words(p.get("text", ""))) if "text" in p and not p.get("thought") else 1 for p in parts)
            output = min(sent, reply.output_tokens)
            last = position == len(chunks) - 1
            events.append((None, self._response(reply, call, number, parts, output, last)))
        return sse(events)
