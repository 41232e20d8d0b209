"""``interrupt_on`` in the DeepAgent form -> LangChain `HumanInTheLoopMiddleware` config (Agent and DeepAgent).

``{tool: True}`` allows every decision; ``{tool: {"decisions": [...], "question": str | callable(tool_call)}}``
restricts them and sets the question shown to the human; ``{tool: False}`` turns approval off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from langchain.agents.middleware import HumanInTheLoopMiddleware, InterruptOnConfig

from ai_utils.client import DECISION_TYPES as DECISIONS
from ai_utils.exceptions import UserError

__all__ = ["DECISIONS", "hitl_middleware", "to_interrupt_on"]


def _question(question: Any, tool: str) -> Any:
    if isinstance(question, str):
        return question
    if callable(question):
        ask = cast("Callable[[Any], Any]", question)
        return lambda tool_call, state, runtime: str(ask(tool_call))
    raise UserError(
        f"interrupt_on[{tool!r}]['question'] must be a str or a function of the tool call, got {question!r}."
    )


def _entry(tool: str, value: Any) -> bool | InterruptOnConfig:
    if isinstance(value, bool):
        return value
    if not isinstance(value, Mapping):
        raise UserError(
            f"interrupt_on[{tool!r}] must be True/False or {{'decisions': [...], 'question': ...}}, got {value!r}."
        )
    unknown = set(value) - {"decisions", "question", "allowed_decisions", "description"}
    if unknown:
        raise UserError(f"interrupt_on[{tool!r}] has unknown keys {sorted(unknown)!r}; use 'decisions' and 'question'.")
    decisions = list(value.get("decisions", value.get("allowed_decisions", ["approve", "reject"])))
    bad = [d for d in decisions if d not in DECISIONS]
    if bad or not decisions:
        raise UserError(
            f"interrupt_on[{tool!r}]['decisions'] = {decisions!r}; allowed are {list(DECISIONS)!r} (at least one)."
        )
    config: dict[str, Any] = {"allowed_decisions": decisions}
    question = value.get("question", value.get("description"))
    if question is not None:
        config["description"] = _question(question, tool)
    return cast("InterruptOnConfig", config)


def to_interrupt_on(interrupt_on: Mapping[str, Any]) -> dict[str, bool | InterruptOnConfig]:
    """Validate and convert ``interrupt_on`` to LangChain's form."""
    if not isinstance(interrupt_on, Mapping):
        raise UserError(f"interrupt_on must be a mapping of tool name -> config, got {interrupt_on!r}.")
    return {str(tool): _entry(str(tool), value) for tool, value in interrupt_on.items()}


def hitl_middleware(interrupt_on: Mapping[str, Any]) -> HumanInTheLoopMiddleware:
    """The approval middleware for ``interrupt_on`` (batched: parallel calls pause together)."""
    return HumanInTheLoopMiddleware(interrupt_on=to_interrupt_on(interrupt_on))
