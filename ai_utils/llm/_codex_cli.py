"""`ChatCodexCLI`: the locally logged-in OpenAI Codex CLI (``codex exec``) as a LangChain chat model.

Non-interactive mode: ``codex exec --json`` prints one JSON event a line (``thread.started``,
``turn.started``, ``item.started``/``item.completed`` with ``item.type`` ``reasoning`` or
``agent_message``, ``turn.completed`` with ``usage``, ``turn.failed``/``error``). The answer is the
last agent message of the turn; earlier agent messages are progress notes and are surfaced as
reasoning. ``-`` makes codex read the prompt from stdin. The sandbox is read-only.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from langchain_core.messages import AIMessageChunk
from langchain_core.messages.ai import UsageMetadata

from ai_utils.exceptions import ProviderError
from ai_utils.llm._cli import CLIChatModel
from ai_utils.llm._cli_prompt import excerpt, reasoning_chunk

__all__ = ["ChatCodexCLI"]


def _usage(raw: Any) -> UsageMetadata | None:
    if not isinstance(raw, dict):
        return None
    inputs = int(raw.get("input_tokens") or 0)
    output = int(raw.get("output_tokens") or 0)
    return UsageMetadata(
        input_tokens=inputs,
        output_tokens=output,
        total_tokens=inputs + output,
        input_token_details={"cache_read": int(raw.get("cached_input_tokens") or 0)},
    )


class _CodexParser:
    def __init__(self, *, model: str) -> None:
        self.model = model
        self.held: str | None = None
        self.sent_reasoning = False
        self.usage: Any = None
        self.errors: list[str] = []

    def _reasoning(self, text: str) -> AIMessageChunk:
        chunk = reasoning_chunk(f"\n\n{text}" if self.sent_reasoning else text)
        self.sent_reasoning = True
        return chunk

    def feed(self, line: str) -> list[AIMessageChunk]:
        try:
            event = json.loads(line)
        except ValueError:
            return []
        if not isinstance(event, dict):
            return []
        kind = event.get("type")
        if kind == "item.completed":
            item = event.get("item") or {}
            item_type = item.get("type") or item.get("item_type")
            text = item.get("text")
            if not isinstance(text, str) or not text:
                return []
            if item_type in ("agent_message", "assistant_message"):
                chunks = [self._reasoning(self.held)] if self.held is not None else []
                self.held = text
                return chunks
            if item_type == "reasoning":
                return [self._reasoning(text)]
        elif kind == "turn.completed":
            self.usage = event.get("usage")
        elif kind == "turn.failed":
            message = (event.get("error") or {}).get("message") or "turn failed"
            raise ProviderError(
                f"The codex CLI turn failed: {excerpt(str(message))}. Check the model name and `codex login`.",
                provider="codex-cli",
            )
        elif kind == "error" and event.get("message"):
            self.errors.append(str(event["message"]))
        return []

    def finish(self) -> list[AIMessageChunk]:
        if self.held is None:
            detail = f": {excerpt(self.errors[-1])}" if self.errors else ""
            raise ProviderError(
                f"The codex CLI gave no answer{detail}. Run `codex exec --json` in a terminal to check it works "
                "and is logged in.",
                provider="codex-cli",
            )
        metadata = {"model_provider": "codex-cli", "model_name": self.model}
        return [
            AIMessageChunk(content=self.held),
            AIMessageChunk(
                content="", usage_metadata=_usage(self.usage), response_metadata=metadata, chunk_position="last"
            ),
        ]


class ChatCodexCLI(CLIChatModel):
    """Chat model that runs the locally logged-in OpenAI Codex CLI (``codex exec``), no API key needed.

    ``reasoning`` becomes ``-c model_reasoning_effort=<level>``; system messages are put in front of
    the prompt (codex exec has no system-prompt flag); temperature is ignored. The sandbox is
    read-only. `bind_tools` offers tools through the prompt (one JSON tool call per reply, checked and
    repaired once), so `Agent` and `DeepAgent` run on it; `with_structured_output` asks for JSON in the prompt.

    Example:
        ```python
        llm = ChatCodexCLI(model="gpt-5.5", reasoning="low")
        llm.invoke("Name three prime numbers.")
        ```
    """

    provider: ClassVar[str] = "codex-cli"

    def _command(self, executable: str, model: str, system: str | None, *, streaming: bool) -> list[str]:
        command = [executable, "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only", "-m", model]
        if self.reasoning:
            command += ["-c", f'model_reasoning_effort="{self.reasoning}"']
        return [*command, *self.extra_args, "-"]

    def _stdin(self, system: str | None, prompt: str) -> str:
        return f"<system>\n{system}\n</system>\n\n{prompt}" if system else prompt

    def _parser(self, *, streaming: bool) -> _CodexParser:
        return _CodexParser(model=self.model_name)
