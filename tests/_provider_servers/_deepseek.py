"""`FakeDeepSeekServer`: DeepSeek's Chat Completions API (OpenAI-compatible, with its own fields), JSON and SSE.

DeepSeek documents its API as OpenAI-compatible and uses the ``openai`` SDK in its own examples, so the shape
is the SDK's ``ChatCompletion`` / ``ChatCompletionChunk`` plus DeepSeek's fields, checked with
``openai.OpenAI(base_url=...).chat.completions.create`` in tests/llm/test_provider_servers.py:

- ``POST /chat/completions`` (also under ``/v1``), bearer auth;
- ``message.reasoning_content`` (deepseek-reasoner) next to ``content``; ``tool_calls``;
- ``usage.prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens`` (DeepSeek's context cache) beside the
  OpenAI counts;
- stream: ``chat.completion.chunk`` events (``delta.reasoning_content`` first, then ``delta.content``, tool
  call argument pieces), a last chunk with ``finish_reason`` and the usage, then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from _provider_servers._base import OpenAIStyleServer, RecordedCall, Reply, sse, words

__all__ = ["FakeDeepSeekServer"]

_PATHS = frozenset({"/chat/completions", "/v1/chat/completions"})


class FakeDeepSeekServer(OpenAIStyleServer):
    """A fake DeepSeek API on 127.0.0.1 (see the module docstring); ``url`` is the ``base_url``."""

    def __init__(self, *, api_key: str | None = "sk-fake-deepseek") -> None:
        super().__init__(name="FakeDeepSeekServer", api_key=api_key)

    def _describe(self, body: Any, path: str) -> tuple[str, str, bool]:
        if not isinstance(body, dict):
            return "", "", False
        texts: list[str] = []
        for message in body.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts.extend(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        return "\n".join(texts), str(body.get("model") or ""), bool(body.get("stream"))

    def _route(self, call: RecordedCall) -> tuple[int, bytes, dict[str, str]]:
        if call.method != "POST" or call.path not in _PATHS:
            return self._error(404, f"No route for {call.method} {call.path}")
        body = call.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return self._error(400, "messages: field required")
        for message in body["messages"]:
            if isinstance(message, dict) and isinstance(message.get("content"), list):
                kinds = {p.get("type") for p in message["content"] if isinstance(p, dict)}
                if kinds - {"text"}:
                    # DeepSeek's chat models take text only: an image part is a 400, as on the real API.
                    return self._error(400, f"unknown variant `{sorted(kinds - {'text'})[0]}`, expected `text`")
        reply = self.pick(call)
        number = self.next_id()
        if call.stream:
            return self.sse_reply(self._events(reply, call, number))
        return self.json_reply(self._completion(reply, call, number))

    def _usage(self, reply: Reply, call: RecordedCall) -> dict[str, Any]:
        prompt = self.prompt_tokens(reply, call)
        reasoning = len(words(reply.thinking))
        return {
            "prompt_tokens": prompt,
            "completion_tokens": reply.output_tokens + reasoning,
            "total_tokens": prompt + reply.output_tokens + reasoning,
            "prompt_tokens_details": {"cached_tokens": reply.cache_read},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
            "prompt_cache_hit_tokens": reply.cache_read,
            "prompt_cache_miss_tokens": prompt - reply.cache_read,
        }

    @staticmethod
    def _tool_calls(reply: Reply, number: int) -> list[dict[str, Any]]:
        return [
            {
                "index": index,
                "id": f"call_fake_{number:04d}_{index}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.args, separators=(",", ":"))},
            }
            for index, c in enumerate(reply.tool_calls)
        ]

    def _completion(self, reply: Reply, call: RecordedCall, number: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.thinking:
            message["reasoning_content"] = reply.thinking
        if reply.tool_calls:
            message["tool_calls"] = [
                {k: v for k, v in c.items() if k != "index"} for c in self._tool_calls(reply, number)
            ]
        return {
            "id": f"fake-{number:04d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or call.model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": self._usage(reply, call),
        }

    def _events(self, reply: Reply, call: RecordedCall, number: int) -> bytes:
        base = {
            "id": f"fake-{number:04d}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": reply.model or call.model,
            "system_fingerprint": "fp_fake",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> tuple[None, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return None, {**base, "choices": [choice], "usage": usage}

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"reasoning_content": piece}) for piece in words(reply.thinking)]
        events += [chunk({"content": piece}) for piece in words(reply.text)]
        for tool_call in self._tool_calls(reply, number):
            arguments = tool_call["function"]["arguments"]
            head = {**tool_call, "function": {"name": tool_call["function"]["name"], "arguments": ""}}
            events.append(chunk({"tool_calls": [head]}))
            for cut in range(0, len(arguments), 8):
                piece = {"index": tool_call["index"], "function": {"arguments": arguments[cut : cut + 8]}}
                events.append(chunk({"tool_calls": [piece]}))
        events.append(chunk({"content": ""}, "tool_calls" if reply.tool_calls else "stop", self._usage(reply, call)))
        return sse(events, done="[DONE]")
