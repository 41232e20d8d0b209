"""`FakeAnthropicServer`: the Anthropic Messages API (``POST /v1/messages``), JSON and SSE.

Written from the ``anthropic`` SDK's own models (``anthropic.types.Message``, ``Usage``, the ``Raw*Event``
stream events) and checked with ``anthropic.Anthropic(base_url=...)`` in tests/llm/test_provider_servers.py:

- auth ``x-api-key`` (or ``Authorization: Bearer``, which this SDK generation sends), a required
  ``anthropic-version`` header, ``anthropic-beta`` recorded as sent;
- body ``model``, ``max_tokens``, ``messages`` (required), ``system``, ``tools`` (``input_schema``), ``stream``;
- reply ``{"type": "message", "content": [text, tool_use...], "stop_reason", "usage": {input_tokens,
  output_tokens, cache_creation_input_tokens, cache_read_input_tokens}}`` and a ``request-id`` header;
- stream: ``message_start`` (usage with the input and cache tokens), ``ping``, per block
  ``content_block_start`` / ``content_block_delta`` (``text_delta``, ``input_json_delta``, ``thinking_delta``)
  / ``content_block_stop``, ``message_delta`` (stop reason, cumulative usage), ``message_stop``;
- errors ``{"type": "error", "error": {"type", "message"}}`` (529 ``overloaded_error``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from _provider_servers._base import ProviderServer, RecordedCall, Reply, sse, words
from ai_utils.testing._http import dumps

__all__ = ["FakeAnthropicServer"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


def _block_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_result":
            texts.extend(_block_texts(block.get("content")))
    return texts


class FakeAnthropicServer(ProviderServer):
    """A fake Anthropic API on 127.0.0.1 (see the module docstring); ``url`` is the SDK's ``base_url``."""

    def __init__(self, *, api_key: str | None = "sk-ant-fake") -> None:
        super().__init__(name="FakeAnthropicServer", api_key=api_key)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (the SDK appends ``/v1/messages``)."""
        return f"http://127.0.0.1:{self.port}"

    def _key_of(self, headers: Mapping[str, str]) -> str | None:
        # The API takes the key as ``x-api-key``; this SDK generation sends it as a bearer token.
        bearer = headers.get("authorization") or ""
        return headers.get("x-api-key") or (bearer.removeprefix("Bearer ") if bearer.startswith("Bearer ") else None)

    def _error(self, status: int, message: str) -> tuple[int, bytes, dict[str, str]]:
        kind = _ERROR_TYPES.get(status, "api_error")
        return status, dumps({"type": "error", "error": {"type": kind, "message": message}}), {}

    def _describe(self, body: Any, path: str) -> tuple[str, str, bool]:
        if not isinstance(body, dict):
            return "", "", False
        texts = _block_texts(body.get("system") or [])
        for message in body.get("messages") or []:
            if isinstance(message, dict):
                texts.extend(_block_texts(message.get("content")))
        return "\n".join(texts), str(body.get("model") or ""), bool(body.get("stream"))

    def _route(self, call: RecordedCall) -> tuple[int, bytes, dict[str, str]]:
        if call.method != "POST" or call.path != "/v1/messages":
            return self._error(404, f"No route for {call.method} {call.path}")
        if not call.headers.get("anthropic-version"):
            return self._error(400, "anthropic-version: header is required")
        body = call.body
        if not isinstance(body, dict):
            return self._error(400, "The request body is not valid JSON.")
        for field, kind in (("model", str), ("max_tokens", int), ("messages", list)):
            if not isinstance(body.get(field), kind):
                return self._error(400, f"{field}: Field required")
        if not body["messages"]:
            return self._error(400, "messages: at least one message is required")
        reply = self.pick(call)
        number = self.next_id()
        message_id = f"msg_fake_{number:04d}"
        headers = {"request-id": f"req_fake_{number:04d}"}
        if call.stream:
            return self.sse_reply(self._events(reply, call, message_id, number), headers)
        return self.json_reply(self._message(reply, call, message_id, number), headers)

    def _usage(self, reply: Reply, call: RecordedCall, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": self.prompt_tokens(reply, call, with_cache=False),
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": reply.cache_creation,
            "cache_read_input_tokens": reply.cache_read,
        }

    @staticmethod
    def _tool_id(number: int, index: int) -> str:
        return f"toolu_fake_{number:04d}_{index}"

    def _content(self, reply: Reply, number: int) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        if reply.thinking:
            content.append({"type": "thinking", "thinking": reply.thinking, "signature": "fake-signature"})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for index, tool_call in enumerate(reply.tool_calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": self._tool_id(number, index),
                    "name": tool_call.name,
                    "input": tool_call.args,
                }
            )
        return content

    def _message(self, reply: Reply, call: RecordedCall, message_id: str, number: int) -> dict[str, Any]:
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": reply.model or call.model,
            "content": self._content(reply, number),
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": self._usage(reply, call, reply.output_tokens),
        }

    def _events(self, reply: Reply, call: RecordedCall, message_id: str, number: int) -> bytes:
        start = self._message(reply, call, message_id, number)
        start.update(content=[], stop_reason=None, usage=self._usage(reply, call, 1))
        events: list[tuple[str | None, Any]] = [
            ("message_start", {"type": "message_start", "message": start}),
            ("ping", {"type": "ping"}),
        ]
        index = 0
        if reply.thinking:
            block = {"type": "thinking", "thinking": "", "signature": ""}
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            )
            for piece in words(reply.thinking):
                delta = {"type": "thinking_delta", "thinking": piece}
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
            delta = {"type": "signature_delta", "signature": "fake-signature"}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        if reply.text:
            block = {"type": "text", "text": ""}
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            )
            for piece in words(reply.text):
                delta = {"type": "text_delta", "text": piece}
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        for position, tool_call in enumerate(reply.tool_calls):
            block = {"type": "tool_use", "id": self._tool_id(number, position), "name": tool_call.name, "input": {}}
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            )
            arguments = json.dumps(tool_call.args, separators=(",", ":"))
            # The API sends the arguments as JSON fragments; cut them in a few pieces as it does.
            for cut in range(0, len(arguments), 8):
                delta = {"type": "input_json_delta", "partial_json": arguments[cut : cut + 8]}
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        stop = {"stop_reason": "tool_use" if reply.tool_calls else "end_turn", "stop_sequence": None}
        # Cumulative, with the input and cache counts again (``MessageDeltaUsage``), as the API sends it now.
        usage = self._usage(reply, call, reply.output_tokens)
        events.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": usage}))
        events.append(("message_stop", {"type": "message_stop"}))
        return sse(events)
