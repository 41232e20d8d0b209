"""The one place that imports `deepagents` (optional extra ``deep``)."""

from __future__ import annotations

from ai_utils._optional import missing_extra

try:
    from deepagents import create_deep_agent
    from deepagents.backends import StateBackend
    from deepagents.middleware.filesystem import supports_execution
    from deepagents.middleware.skills import SkillsMiddleware
    from deepagents.middleware.subagents import GENERAL_PURPOSE_SUBAGENT
except ImportError as _import_error:
    raise missing_extra("deepagents", extra="deep", feature="DeepAgent") from _import_error

__all__ = ["GENERAL_PURPOSE_SUBAGENT", "SkillsMiddleware", "StateBackend", "create_deep_agent", "supports_execution"]
