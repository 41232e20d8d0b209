"""`ChatClaudeCLI`: the locally logged-in Claude Code CLI (``claude -p``) as a LangChain chat model.

Non-interactive mode: ``claude -p --output-format json`` prints one result object
(``{"type": "result", "subtype": "success", "is_error": false, "result": ..., "usage": {...}}``);
``--output-format stream-json --verbose --include-partial-messages`` prints one JSON event a line,
with ``stream_event`` lines carrying the Messages API deltas (``text_delta``, ``thinking_delta``).
The prompt goes through stdin; built-in tools are switched off (``--tools ""``) so the CLI answers
as a plain chat model.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.ai import UsageMetadata

from ai_utils.exceptions import ProviderError
from ai_utils.llm._cli import CLIChatModel
from ai_utils.llm._cli_prompt import excerpt, reasoning_chunk

__all__ = ["ChatClaudeCLI"]

# Claude's effort levels are low/medium/high/xhigh/max; it has no "minimal".
_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}


def _usage(raw: Any) -> UsageMetadata | None:
    if not isinstance(raw, dict):
        return None
    fresh = int(raw.get("input_tokens") or 0)
    cache_read = int(raw.get("cache_read_input_tokens") or 0)
    cache_creation = int(raw.get("cache_creation_input_tokens") or 0)
    output = int(raw.get("output_tokens") or 0)
    inputs = fresh + cache_read + cache_creation
    return UsageMetadata(
        input_tokens=inputs,
        output_tokens=output,
        total_tokens=inputs + output,
        input_token_details={"cache_read": cache_read, "cache_creation": cache_creation},
    )


class _ClaudeParser:
    def __init__(self, *, model: str, streaming: bool) -> None:
        self.model = model
        self.streaming = streaming
        self.lines: list[str] = []
        self.partial = False
        self.sent_text = False
        self.result: dict[str, Any] | None = None

    def feed(self, line: str) -> list[AIMessageChunk]:
        line = line.strip()
        if not line:
            return []
        if not self.streaming:
            self.lines.append(line)
            return []
        try:
            event = json.loads(line)
        except ValueError:
            return []
        return self._event(event) if isinstance(event, dict) else []

    def _event(self, event: dict[str, Any]) -> list[AIMessageChunk]:
        kind = event.get("type")
        if kind == "result":
            self.result = event
        elif kind == "stream_event":
            self.partial = True
            inner = event.get("event") or {}
            delta = inner.get("delta") or {} if inner.get("type") == "content_block_delta" else {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                self.sent_text = True
                return [AIMessageChunk(content=delta["text"])]
            if delta.get("type") == "thinking_delta" and delta.get("thinking"):
                return [reasoning_chunk(delta["thinking"])]
        elif kind == "assistant" and not self.partial:
            # Without partial messages (older CLIs) whole assistant messages arrive instead of deltas.
            chunks = []
            for block in (event.get("message") or {}).get("content") or []:
                if block.get("type") == "text" and block.get("text"):
                    self.sent_text = True
                    chunks.append(AIMessageChunk(content=block["text"]))
                elif block.get("type") == "thinking" and block.get("thinking"):
                    chunks.append(reasoning_chunk(block["thinking"]))
            return chunks
        return []

    def finish(self) -> list[AIMessageChunk]:
        if not self.streaming:
            self._read_whole_output()
        result = self.result
        if result is None:
            raise ProviderError(
                "The claude CLI printed no result object. Run `claude -p --output-format json` in a terminal "
                "to check it works and is logged in.",
                provider="claude-cli",
            )
        if result.get("is_error") or result.get("subtype", "success") != "success":
            detail = result.get("result") or result.get("errors") or result.get("subtype")
            raise ProviderError(
                f"The claude CLI reported an error ({result.get('subtype')!r}): {excerpt(str(detail))}. "
                "Check the model name and that `claude` is logged in.",
                provider="claude-cli",
            )
        chunks = []
        text = result.get("result")
        if not self.sent_text and isinstance(text, str):
            chunks.append(AIMessageChunk(content=text))
        metadata = {"model_provider": "claude-cli", "model_name": self.model}
        for key in ("session_id", "total_cost_usd", "stop_reason"):
            if result.get(key) is not None:
                metadata[key] = result[key]
        chunks.append(
            AIMessageChunk(
                content="",
                usage_metadata=_usage(result.get("usage")),
                response_metadata=metadata,
                chunk_position="last",
            )
        )
        return chunks

    def _read_whole_output(self) -> None:
        text = "\n".join(self.lines)
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ProviderError(
                f"The claude CLI printed no JSON: {excerpt(text) or 'no output'}. Check that it works in a terminal.",
                provider="claude-cli",
            ) from exc
        # With --verbose, json output is the list of all events instead of the result alone.
        for event in data if isinstance(data, list) else [data]:
            if isinstance(event, dict) and event.get("type") == "result":
                self.result = event


class ChatClaudeCLI(CLIChatModel):
    """Chat model that runs the locally logged-in Claude Code CLI (``claude -p``), no API key needed.

    ``reasoning`` becomes ``--effort`` (``minimal`` maps to ``low``); system messages become
    ``--system-prompt``; temperature is not supported by the CLI and is ignored. `bind_tools` offers tools
    through the prompt (one JSON tool call per reply, checked and repaired once), so `Agent` and `DeepAgent`
    run on it; `with_structured_output` asks for JSON in the prompt.

    Example:
        ```python
        llm = ChatClaudeCLI(model="sonnet", reasoning="high")
        llm.invoke("Name three prime numbers.")
        ```
    """

    provider: ClassVar[str] = "claude-cli"

    def _command(self, executable: str, model: str, system: str | None, *, streaming: bool) -> list[str]:
        command = [executable, "-p", "--output-format"]
        command += ["stream-json", "--verbose", "--include-partial-messages"] if streaming else ["json"]
        command += ["--model", model, "--tools", "", "--no-session-persistence"]
        if system:
            command += ["--system-prompt", system]
        if self.reasoning:
            command += ["--effort", _EFFORT[self.reasoning]]
        return command + list(self.extra_args)

    def _parser(self, *, streaming: bool) -> _ClaudeParser:
        return _ClaudeParser(model=self.model_name, streaming=streaming)
