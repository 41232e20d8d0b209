"""Named context blocks rendered for a prompt."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ContextBlock", "render_context_blocks"]


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """A named piece of context for the prompt.

    Args:
        name: the tag name.
        content: the text (anything else is rendered as JSON).
    """

    name: str
    content: Any


def render_context_blocks(blocks: Sequence[ContextBlock | Mapping[str, Any]]) -> str:
    """Render named blocks as ``<name>content</name>``, joined by newlines.

    Args:
        blocks: `ContextBlock`s or ``{"name", "content"}`` mappings.

    Returns:
        The text: one ``<name>content</name>`` line per block.
    """
    rendered: list[str] = []
    for block in blocks:
        name, content = (
            (block.name, block.content) if isinstance(block, ContextBlock) else (block["name"], block["content"])
        )
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, indent=2, default=str)
        rendered.append(f"<{name}>{text}</{name}>")
    return "\n".join(rendered)
