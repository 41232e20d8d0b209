"""`Route`: a feature bound to a provider and model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Route"]

# Providers whose routes are text-only unless the route says otherwise (the seed's DeepSeek adapter).
TEXT_ONLY_PROVIDERS = frozenset({"deepseek"})


@dataclass(frozen=True)
class Route:
    """Bind a feature to a provider and model (built with `ai_utils.get_llm`).

    Args:
        feature: the route key; dot-namespacing is recommended (``"myapp.scope.purpose"``).
        provider: a `get_llm` provider (``"openai"``, ``"anthropic"``, ``"gemini"``, ``"deepseek"``,
            ``"openrouter"``, ``"fake"``, ...).
        model: the model name.
        options: extra `get_llm` keyword arguments (``temperature``, ``base_url``, ``responses`` for fake, ...).
        text_only: the model takes text only: `Gateway.complete` / `Gateway.stream` strip images, tool calls,
            tool results and tools from its calls and report them (``dropped_content``). ``None``: text-only for
            DeepSeek, not for the others.
    """

    feature: str
    provider: str
    model: str
    options: Mapping[str, Any] = field(default_factory=dict)
    text_only: bool | None = None

    @property
    def is_text_only(self) -> bool:
        """Whether calls on this route are stripped to text (``text_only``, else the provider's default)."""
        return self.text_only if self.text_only is not None else self.provider in TEXT_ONLY_PROVIDERS
