"""`JevToolCaller`'s argument checks: ``interrupt_on``, the gate, ``call_tool`` params and ``context``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from ai_utils.exceptions import UserError
from ai_utils.jev.tool_caller._types import ConfidenceGate, JevParamsError

__all__ = ["check_forced", "check_gate", "check_interrupt_on", "unknown_tool", "validate_context"]


def check_interrupt_on(interrupt_on: Any) -> dict[str, str | Callable[..., str]]:
    """Validate ``interrupt_on=``: tool name -> non-empty question or callable."""
    if interrupt_on is None:
        return {}
    if not isinstance(interrupt_on, Mapping):
        raise UserError(f"`interrupt_on` must map tool names to questions, got {type(interrupt_on).__name__}.")
    for name, question in interrupt_on.items():
        if not (callable(question) or (isinstance(question, str) and question.strip())):
            raise UserError(
                f"`interrupt_on[{name!r}]` must be a question (non-empty str) or a callable returning one, "
                f"got {question!r}."
            )
    return dict(interrupt_on)


def check_gate(gate: Any) -> ConfidenceGate:
    """``confidence_gate=`` as a `ConfidenceGate` (default: threshold 0.5)."""
    if isinstance(gate, ConfidenceGate):
        return gate
    options = {} if gate is None else gate  # no gate given: the default thresholds
    if not isinstance(options, Mapping):
        raise UserError(f"`confidence_gate` must be a ConfidenceGate or a mapping, got {type(gate).__name__}.")
    unknown = set(options) - {"min_confidence", "tools"}
    if unknown:
        raise UserError(f"confidence_gate keys {sorted(unknown)!r} are unknown; use `min_confidence` and `tools`.")
    return ConfidenceGate(min_confidence=options.get("min_confidence"), tools=options.get("tools") or {})


def check_forced(params: Any) -> dict[str, Any]:
    """``call_tool(params=...)`` as a dict."""
    if not isinstance(params, Mapping):
        raise JevParamsError(f"call_tool: `params` must be a mapping of parameter name -> value, got {params!r}.")
    return dict(params)


def unknown_tool(tool: str, tools: Mapping[str, Any]) -> None:
    """Raise `UserError` for a ``call_tool`` of a tool this call does not have."""
    raise UserError(f"call_tool: unknown tool {tool!r}; the tools are {sorted(tools)!r}.")


def validate_context(schema: type[BaseModel] | None, context: Any) -> Any:
    """``context`` validated by ``schema``; errors never echo its values (context may hold secrets)."""
    if schema is None:
        if context is not None:
            raise UserError(
                "`context` was given but the caller has no `context_schema`. "
                "Pass `context_schema=MyContext` (a pydantic model) to the constructor."
            )
        return None
    if isinstance(context, schema):
        return context
    try:
        return schema.model_validate({} if context is None else context)
    except ValidationError as error:
        # Never echo the input: context carries secrets.
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in error.errors(include_input=False)
        )
        raise UserError(
            f"`context` does not match `context_schema` {schema.__name__}: {problems}. "
            "Pass a valid context (values are not shown: context may hold secrets)."
        ) from None
