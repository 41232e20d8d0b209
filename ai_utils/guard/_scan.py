"""Text policies of one guardrails instance: secret redaction, content rules, output bounds; message content walks.

Pure functions of the text: no LangGraph, no I/O, so the middleware can run them before or after any call and the
gateway tap can reuse a result. Reasoning is text like any other: content blocks of type ``reasoning``/``thinking``
(their ``reasoning``, ``thinking`` and ``summary[].text``) and ``additional_kwargs["reasoning_content"]`` /
``["reasoning"]`` are scanned with the phase of their message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ai_utils._secrets import redact_secrets
from ai_utils.guard._rules import GuardrailDecision, Phase, Risk, Rule

__all__ = ["ERROR_POLICY", "TextPolicies", "decision"]

ERROR_POLICY = "guardrails.error"
"""The policy id of a decision taken because a guardrail policy itself failed."""

# Text-bearing keys of content blocks: text, v1 reasoning blocks, Anthropic thinking blocks.
_BLOCK_TEXT_KEYS = ("text", "reasoning", "thinking")
# ``additional_kwargs`` keys that carry reasoning (DeepSeek/OpenAI-compatible, OpenAI Responses).
_REASONING_KWARGS = ("reasoning_content", "reasoning")

# Longest secret shape (a 4096-bit private key block is about 3.3k chars): text is cut to the limit plus this
# margin before scanning, so a secret at the cut is still recognised whole, then cut to the limit.
_SCAN_MARGIN = 8_192


def decision(policy_id: str, phase: Phase, action: Any, risk: Risk, tool: str | None = None) -> GuardrailDecision:
    """One decision event (``tool`` only when a tool is involved)."""
    event: GuardrailDecision = {"policy_id": policy_id, "phase": phase, "action": action, "risk": risk}
    if tool is not None:
        event["tool"] = tool
    return event


@dataclass(frozen=True, slots=True)
class TextPolicies:
    """The text policies of one pack: secrets in every phase but tool input, then the content rules."""

    rules: tuple[Rule, ...]
    max_tool_output_chars: int
    max_output_chars: int | None = None

    def scan(self, text: str, phase: Phase, tool: str | None = None) -> tuple[str, list[GuardrailDecision]]:
        """``text`` after the policies of ``phase``, and their decisions (empty: unchanged)."""
        found: list[GuardrailDecision] = []
        if phase != "tool_input":
            text, kinds = redact_secrets(text)
            found.extend(decision(f"secret.{kind}", phase, "redact", "high", tool) for kind in kinds)
        for rule in self.rules:
            if phase in rule.phases:
                text, hit = rule.apply(text)
                if hit:
                    found.append(decision(rule.id, phase, rule.action, rule.risk, tool))
        return text, found

    def has_rules(self, phase: Phase) -> bool:
        """Whether any content rule looks at ``phase``."""
        return any(phase in rule.phases for rule in self.rules)

    def content(self, content: Any, phase: Phase, tool: str | None = None) -> tuple[Any, list[GuardrailDecision]]:
        """Message ``content`` (a str or content blocks) after `scan`; the same object when nothing changed."""
        if isinstance(content, str):
            new, found = self.scan(content, phase, tool)
            return (new if found else content), found
        if not isinstance(content, list):
            return content, []
        found_all: list[GuardrailDecision] = []
        blocks: list[Any] = []
        for block in content:
            if isinstance(block, str):
                new, found = self.scan(block, phase, tool)
                blocks.append(new if found else block)
            elif isinstance(block, Mapping):
                new, found = self._block(block, phase, tool)
                blocks.append(new)
            else:
                found = []
                blocks.append(block)
            found_all.extend(found)
        return (blocks if found_all else content), found_all

    def _block(self, block: Mapping[str, Any], phase: Phase, tool: str | None) -> tuple[Any, list[GuardrailDecision]]:
        """A content block with its text, reasoning, thinking and summary texts scanned."""
        update: dict[str, Any] = {}
        found: list[GuardrailDecision] = []
        for key in _BLOCK_TEXT_KEYS:
            value = block.get(key)
            if isinstance(value, str):
                new, more = self.scan(value, phase, tool)
                if more:
                    update[key] = new
                    found.extend(more)
        summary = block.get("summary")
        if isinstance(summary, list):
            new_summary, more = self.content(summary, phase, tool)
            if more:
                update["summary"] = new_summary
                found.extend(more)
        return ({**block, **update} if update else block), found

    def extras(self, kwargs: Mapping[str, Any], phase: Phase) -> tuple[dict[str, Any] | None, list[GuardrailDecision]]:
        """``additional_kwargs`` with their reasoning scanned: the new dict (``None``: unchanged) and decisions."""
        if not kwargs:
            return None, []
        update: dict[str, Any] = {}
        found: list[GuardrailDecision] = []
        for key in _REASONING_KWARGS:
            value = kwargs.get(key)
            if isinstance(value, str):
                new, more = self.scan(value, phase)
            elif isinstance(value, Mapping):
                new, more = self._block(value, phase, None)
            else:
                continue
            if more:
                update[key] = new
                found.extend(more)
        return ({**kwargs, **update} if update else None), found

    def cut_output(self, content: Any) -> tuple[Any, list[GuardrailDecision]]:
        """An answer cut to ``max_output_chars`` (text blocks share the budget), and the ``truncate`` decision."""
        limit = self.max_output_chars
        if limit is None:
            return content, []
        if isinstance(content, str):
            if len(content) <= limit:
                return content, []
            return content[:limit], [decision("output.limit", "output", "truncate", "low")]
        if isinstance(content, list) and _text_length(content) > limit:
            return _cut_blocks(content, limit)[0], [decision("output.limit", "output", "truncate", "low")]
        return content, []

    def tool_output(self, content: Any, tool: str) -> tuple[Any, list[GuardrailDecision]]:
        """A tool result scanned and cut to ``max_tool_output_chars`` (text blocks share the budget)."""
        limit = self.max_tool_output_chars
        if isinstance(content, str) and len(content) > limit:
            # Scan a margin past the limit, so a secret across the cut is recognised whole, then cut.
            scanned, found = self.scan(content[: limit + _SCAN_MARGIN], "tool_output", tool)
            dropped = len(content) - limit
            found.append(decision("tool.output_limit", "tool_output", "truncate", "low", tool))
            return f"{scanned[:limit]}\n[TRUNCATED: {dropped} more characters]", found
        dropped = 0
        if isinstance(content, list):
            content, dropped = _cut_blocks(content, limit + _SCAN_MARGIN)
        content, found = self.content(content, "tool_output", tool)
        if isinstance(content, list) and _text_length(content) > limit:
            content, more = _cut_blocks(content, limit)
            dropped += more
        if dropped:
            found.append(decision("tool.output_limit", "tool_output", "truncate", "low", tool))
        return content, found

    def args(self, value: Any, tool: str | None, phase: Phase = "tool_input") -> tuple[Any, list[GuardrailDecision]]:
        """Every string in ``value`` (tool arguments, structured output), recursively, after `scan`."""
        if isinstance(value, str):
            return self.scan(value, phase, tool)
        found: list[GuardrailDecision] = []
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                out[key], more = self.args(item, tool, phase)
                found.extend(more)
            return (out if found else value), found
        if isinstance(value, list | tuple):
            items: list[Any] = []
            for item in value:
                new, more = self.args(item, tool, phase)
                items.append(new)
                found.extend(more)
            return (items if found else value), found
        return value, found

    def structured(self, value: Any) -> tuple[Any, list[GuardrailDecision]]:
        """A structured answer (pydantic model or mapping) with its strings after the ``output`` policies."""
        if isinstance(value, BaseModel):
            data, found = self.args(value.model_dump(), None, "output")
            return (type(value).model_validate(data) if found else value), found
        return self.args(value, None, "output")


def _block_text(block: Any) -> str | None:
    if isinstance(block, str):
        return block
    text = block.get("text") if isinstance(block, Mapping) else None
    return text if isinstance(text, str) else None


def _text_length(blocks: Sequence[Any]) -> int:
    return sum(len(text) for block in blocks if (text := _block_text(block)) is not None)


def _cut_blocks(blocks: Sequence[Any], limit: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    budget = limit
    dropped = 0
    for block in blocks:
        text = _block_text(block)
        if text is None:
            out.append(block)
            continue
        kept = text[: max(budget, 0)]
        dropped += len(text) - len(kept)
        budget -= len(kept)
        if kept:
            out.append(kept if isinstance(block, str) else {**block, "text": kept})
    return out, dropped
