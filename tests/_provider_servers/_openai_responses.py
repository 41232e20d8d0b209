"""`FakeResponsesServer`: the OpenAI Responses API (``POST /v1/responses``), JSON and SSE.

Written from the ``openai`` SDK's own models (``openai.types.responses.Response``, ``ResponseOutputMessage``,
``ResponseFunctionToolCall``, ``ResponseUsage`` and the ``Response*Event`` stream events) and checked with
``openai.OpenAI(base_url=...).responses.create`` / ``.responses.stream`` in tests/llm/test_provider_servers.py:

- bearer auth; body ``model``, ``input`` (a string or items: messages with ``input_text``, ``function_call``,
  ``function_call_output``), ``instructions``, ``tools`` (``{"type": "function", "name", "parameters"}``),
  ``stream``, ``max_output_tokens``, ``text.format``;
- reply ``{"object": "response", "status": "completed", "output": [message(output_text), function_call...],
  "usage": {input_tokens, input_tokens_details.cached_tokens, output_tokens, ..., total_tokens}}``;
- stream: ``response.created``, ``response.in_progress``, per output item ``response.output_item.added``,
  ``response.content_part.added`` / ``response.output_text.delta`` / ``.done`` / ``response.content_part.done``
  or ``response.function_call_arguments.delta`` / ``.done``, ``response.output_item.done``, then
  ``response.completed`` with the full response; every event has its ``sequence_number``;
- errors ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from _provider_servers._base import OpenAIStyleServer, RecordedCall, Reply, sse, words

__all__ = ["FakeResponsesServer"]


def _input_texts(items: Any) -> list[str]:
    if isinstance(items, str):
        return [items]
    texts: list[str] = []
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        if item.get("type") == "function_call_output" and isinstance(item.get("output"), str):
            texts.append(item["output"])
    return texts


class FakeResponsesServer(OpenAIStyleServer):
    """A fake OpenAI Responses API on 127.0.0.1 (see the module docstring); ``url`` is the SDK's ``base_url``."""

    def __init__(self, *, api_key: str | None = "sk-fake-openai") -> None:
        super().__init__(name="FakeResponsesServer", api_key=api_key)

    def _describe(self, body: Any, path: str) -> tuple[str, str, bool]:
        if not isinstance(body, dict):
            return "", "", False
        texts = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
        texts.extend(_input_texts(body.get("input")))
        return "\n".join(texts), str(body.get("model") or ""), bool(body.get("stream"))

    def _route(self, call: RecordedCall) -> tuple[int, bytes, dict[str, str]]:
        if call.method != "POST" or call.path != "/v1/responses":
            return self._error(404, f"Invalid URL ({call.method} {call.path})")
        body = call.body
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return self._error(400, "Missing required parameter: 'model'.")
        if not isinstance(body.get("input"), (str, list)) or not body["input"]:
            return self._error(400, "Missing required parameter: 'input'.")
        reply = self.pick(call)
        number = self.next_id()
        headers = {"x-request-id": f"req_fake_{number:04d}"}
        if call.stream:
            return self.sse_reply(self._events(reply, call, number), headers)
        return self.json_reply(self._response(reply, call, number, "completed", self._output(reply, number)), headers)

    @staticmethod
    def _message(number: int, text: str, status: str = "completed") -> dict[str, Any]:
        return {
            "type": "message",
            "id": f"msg_fake_{number:04d}",
            "status": status,
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if text else [],
        }

    @staticmethod
    def _call(number: int, index: int, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
        return {
            "type": "function_call",
            "id": f"fc_fake_{number:04d}_{index}",
            "call_id": f"call_fake_{number:04d}_{index}",
            "name": name,
            "arguments": arguments,
            "status": status,
        }

    def _output(self, reply: Reply, number: int) -> list[dict[str, Any]]:
        output: list[dict[str, Any]] = []
        if reply.text:
            output.append(self._message(number, reply.text))
        for index, tool_call in enumerate(reply.tool_calls):
            output.append(self._call(number, index, tool_call.name, json.dumps(tool_call.args, separators=(",", ":"))))
        return output

    def _response(
        self, reply: Reply, call: RecordedCall, number: int, status: str, output: list[dict[str, Any]]
    ) -> dict[str, Any]:
        body = call.body
        prompt = self.prompt_tokens(reply, call)
        done = status == "completed"
        return {
            "id": f"resp_fake_{number:04d}",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "completed_at": int(time.time()) if done else None,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": reply.model or call.model,
            "output": output,
            "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": reply.cache_read, "cache_write_tokens": 0},
                "output_tokens": reply.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + reply.output_tokens,
            }
            if done
            else None,
            "user": None,
            "metadata": {},
        }

    def _events(self, reply: Reply, call: RecordedCall, number: int) -> bytes:
        events: list[tuple[str | None, Any]] = []

        def emit(kind: str, **fields: Any) -> None:
            events.append((kind, {"type": kind, "sequence_number": len(events), **fields}))

        emit("response.created", response=self._response(reply, call, number, "in_progress", []))
        emit("response.in_progress", response=self._response(reply, call, number, "in_progress", []))
        index = 0
        if reply.text:
            item_id = f"msg_fake_{number:04d}"
            emit("response.output_item.added", output_index=index, item=self._message(number, "", "in_progress"))
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            emit("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=part)
            for piece in words(reply.text):
                emit(
                    "response.output_text.delta",
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                text=reply.text,
                logprobs=[],
            )
            done_part = {**part, "text": reply.text}
            emit("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=done_part)
            emit("response.output_item.done", output_index=index, item=self._message(number, reply.text))
            index += 1
        for position, tool_call in enumerate(reply.tool_calls):
            arguments = json.dumps(tool_call.args, separators=(",", ":"))
            added = self._call(number, position, tool_call.name, "", "in_progress")
            emit("response.output_item.added", output_index=index, item=added)
            for cut in range(0, len(arguments), 8):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=added["id"],
                    output_index=index,
                    delta=arguments[cut : cut + 8],
                )
            emit("response.function_call_arguments.done", item_id=added["id"], output_index=index, arguments=arguments)
            emit(
                "response.output_item.done",
                output_index=index,
                item=self._call(number, position, tool_call.name, arguments),
            )
            index += 1
        emit(
            "response.completed", response=self._response(reply, call, number, "completed", self._output(reply, number))
        )
        return sse(events)
