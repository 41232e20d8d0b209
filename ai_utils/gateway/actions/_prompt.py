"""The system-prompt part of an actions agent: the actions the actor may propose and the directive syntax."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from ai_utils.gateway.actions._registry import ActionDefinition

__all__ = ["render_actions_prompt"]


def _params_schema(schema: Any) -> Any:
    """The JSON schema of an action's params, when its validator can say (a pydantic model, a schema dict)."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    describe = getattr(schema, "model_json_schema", None)
    if callable(describe):
        return describe()
    return dict(schema) if isinstance(schema, Mapping) else None


def _action_line(action: ActionDefinition) -> str:
    line = f"- {action.id}: {action.description}"
    schema = _params_schema(action.schema)
    if schema is not None:
        line += f"\n  params (JSON schema): {json.dumps(schema, ensure_ascii=False, sort_keys=True)}"
    return line


def render_actions_prompt(actions: Sequence[ActionDefinition], *, max_actions: int | None) -> str:
    """The instructions an actions agent adds to its system prompt.

    Args:
        actions: the actions the actor may propose (``registry.available(actor)``).
        max_actions: how many proposals count per turn (``None``: no cap).

    Returns:
        The text: the directive syntax, the cap and one line per action (id, description, params schema).
    """
    cap = "" if max_actions is None else f" At most {max_actions} action proposals per turn count; more are dropped."
    listing = "\n".join(_action_line(a) for a in actions) or "(none: this user may not propose any action)"
    return (
        "## Actions and follow-ups\n"
        "Besides your answer you may propose actions for the application to run (you never run them yourself) "
        "and suggest what the user could ask next. Write each on its own line after your answer; these lines "
        "are not shown to the user:\n"
        "!> <id> <json>   propose the action <id>, its params as one JSON object on the same line\n"
        "?> <follow-up>   suggest a next question or request of the user\n"
        f"Only propose actions listed here, with params that match their schema.{cap}\n"
        f"Actions you may propose:\n{listing}"
    )
