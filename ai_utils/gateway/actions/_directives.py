"""Directives in a model reply: ``!> action.id {json}`` proposals and ``?> follow-up`` lines, parsed and gated."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ai_utils.gateway.actions._registry import ActionProposal, ActionRegistry, ValidatedAction
from ai_utils.gateway.actor import Actor, to_actor

__all__ = ["DirectiveResult", "ParsedDirectives", "parse_assistant_directives", "validate_directives"]


@dataclass(frozen=True, slots=True)
class ParsedDirectives:
    """A model reply with its directives taken out.

    Args:
        text: the visible text.
        actions: ``!>`` action proposals, in order.
        follow_ups: ``?>`` follow-up suggestions.
        parse_errors: soft errors (e.g. bad JSON params); empty for clean replies.
    """

    text: str
    actions: list[ActionProposal]
    follow_ups: list[str]
    parse_errors: list[str]


def parse_assistant_directives(text: str, *, max_actions: int | None = None) -> ParsedDirectives:
    """Strip ``!> action.id {json params}`` and ``?> follow-up`` lines from a reply.

    Args:
        text: the model reply.
        max_actions: keep at most this many action proposals (the rest become parse errors).

    Returns:
        The `ParsedDirectives`.
    """
    kept: list[str] = []
    actions: list[ActionProposal] = []
    follow_ups: list[str] = []
    errors: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("?>"):
            if suggestion := stripped[2:].strip():
                follow_ups.append(suggestion)
            continue
        if not stripped.startswith("!>"):
            kept.append(line)
            continue
        action_id, _, raw = stripped[2:].strip().partition(" ")
        if not action_id:
            errors.append(f"Empty action directive: {stripped!r}")
            continue
        params: Any = {}
        if raw.strip():
            try:
                params = json.loads(raw)
            except json.JSONDecodeError as err:
                errors.append(f"Invalid JSON params for action {action_id!r}: {err.msg}")
                continue
        if not isinstance(params, dict):
            errors.append(f"Params for action {action_id!r} must be a JSON object, got {raw.strip()!r}")
            continue
        if max_actions is not None and len(actions) >= max_actions:
            errors.append(f"Action {action_id!r} dropped: more than {max_actions} actions proposed")
            continue
        actions.append(ActionProposal(action_id, params))
    return ParsedDirectives("\n".join(kept).strip(), actions, follow_ups, errors)


@dataclass(frozen=True, slots=True)
class DirectiveResult:
    """A reply with its directive-proposed actions already through the registry's policy gate.

    Args:
        message: the visible text (directives stripped).
        actions: each proposal validated by the registry.
        follow_ups: suggested next prompts (``?>`` lines).
        parse_errors: soft parse errors; empty for clean replies.
        trace_id: the run's id (``Agent(actions=...)``: the root LangChain run id of the turn, the parent of its
            audit rows); empty for a bare `validate_directives`.
        model: the model name the reply came from (``Agent(actions=...)``); empty when unknown.
        usage: the summed token usage of the turn's model calls (``input_tokens``, ``output_tokens``,
            ``total_tokens``), ``None`` when the model reports none.
    """

    message: str
    actions: list[ValidatedAction]
    follow_ups: list[str]
    parse_errors: list[str]
    trace_id: str = ""
    model: str = ""
    usage: dict[str, int] | None = None


def validate_directives(
    text: str,
    registry: ActionRegistry,
    *,
    actor: Actor | Mapping[str, Any] | None = None,
    max_actions: int | None = 3,
) -> DirectiveResult:
    """Parse a reply's directives and validate every proposed action (the seed agent's ``respond`` step).

    Args:
        text: the model reply.
        registry: the action gate.
        actor: who would run the actions.
        max_actions: cap on proposals per reply (the seed's default is 3); extra ones become parse errors.

    Returns:
        The `DirectiveResult`.
    """
    parsed = parse_assistant_directives(text, max_actions=max_actions)
    resolved = to_actor(actor)
    return DirectiveResult(
        message=parsed.text,
        actions=[registry.validate(p, resolved) for p in parsed.actions],
        follow_ups=parsed.follow_ups,
        parse_errors=parsed.parse_errors,
    )
