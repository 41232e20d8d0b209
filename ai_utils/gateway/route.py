"""`Route`: a feature bound to a provider and model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Route"]


@dataclass(frozen=True)
class Route:
    """Bind a feature to a provider and model (built with `ai_utils.get_llm`).

    Args:
        feature: the route key; dot-namespacing is recommended (``"myapp.scope.purpose"``).
        provider: a `get_llm` provider (``"openai"``, ``"openrouter"``, ``"fake"``, ...).
        model: the model name.
        options: extra `get_llm` keyword arguments (``temperature``, ``base_url``, ``responses`` for fake, ...).
    """

    feature: str
    provider: str
    model: str
    options: Mapping[str, Any] = field(default_factory=dict)
