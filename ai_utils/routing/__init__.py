"""Routing (SPEC §17): mode routing with per-mode tool sets, context builders, model profiles and model routing.

- `KeywordModeRouter` / `ModeDefinition` / `ModeDecision`: ``Agent(modes=router)`` picks a mode per turn.
- `build_system_content`, `build_mode_tool_instruction`, `build_history_messages`, `format_memory_context`.
- `ModelProfiles` + ``get_llm(profile=..., profiles=...)``: named models with fallbacks on retriable errors.
- `resolve_model_route` / `aresolve_model_route` → `ModelRoute`: explicit, pinned, rule (labels, surface,
  invocation source), classifier or fallback, with its audit fields for the gateway row.
"""

from __future__ import annotations

from ai_utils.exceptions import ModelProfileError
from ai_utils.routing._context import (
    build_history_messages,
    build_mode_tool_instruction,
    build_system_content,
    format_memory_context,
)
from ai_utils.routing.modes import KeywordModeRouter, KeywordRule, ModeDecision, ModeDefinition, ModeRouter
from ai_utils.routing.profiles import ModelProfiles
from ai_utils.routing.route import (
    JevRouteClassifier,
    ModelRoute,
    RouteMode,
    RouteRule,
    aresolve_model_route,
    jev_route_classifier,
    resolve_model_route,
)

__all__ = [
    "JevRouteClassifier",
    "KeywordModeRouter",
    "KeywordRule",
    "ModeDecision",
    "ModeDefinition",
    "ModeRouter",
    "ModelProfileError",
    "ModelProfiles",
    "ModelRoute",
    "RouteMode",
    "RouteRule",
    "aresolve_model_route",
    "build_history_messages",
    "build_mode_tool_instruction",
    "build_system_content",
    "format_memory_context",
    "jev_route_classifier",
    "resolve_model_route",
]
