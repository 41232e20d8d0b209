"""Check a run's ``context`` against the agent's ``context_schema`` before the graph sees it.

LangGraph builds the schema from the context itself, and pydantic's ``ValidationError`` shows the
input (``input_value={'api_token': '...'}``), so a secret in the context would end up in the error,
in logs and on the NDJSON error line. Here a context that does not fit raises a `UserError` that
names the fields and what is wrong with them, never their values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from typing_extensions import is_typeddict

from ai_utils.exceptions import UserError

__all__ = ["check_context"]


def check_context(schema: type[Any] | None, context: Any, *, owner: str) -> None:
    """Raise `UserError` when ``context`` does not fit ``schema`` (a pydantic model, dataclass or TypedDict).

    Args:
        schema: the agent's ``context_schema`` (``None``: nothing to check).
        context: the ``context`` of this call (``None``: none given).
        owner: the agent class name, for the message.
    """
    if schema is None or context is None:
        return
    name = getattr(schema, "__name__", repr(schema))
    if isinstance(schema, type) and not is_typeddict(schema) and isinstance(context, schema):
        return
    if not isinstance(context, Mapping):
        raise UserError(
            f"{owner} context must be a {name} or a mapping of its fields, got a {type(context).__name__}; "
            f"pass context={name}(...) or a dict."
        )
    problems = _problems(schema, context)
    if problems:
        raise UserError(
            f"{owner} context does not fit {name}: {', '.join(problems)}. "
            "Pass every required field with a value of the right type (values are not shown here)."
        )


def _problems(schema: type[Any], context: Mapping[Any, Any]) -> list[str]:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(dict(context))
        except ValidationError as error:
            # Only the field path and the error type: messages of custom validators may quote the value.
            return [
                f"{'.'.join(str(part) for part in item['loc']) or '<root>'} ({item['type']})"
                for item in error.errors(include_url=False, include_context=False, include_input=False)
            ]
        return []
    keys = {str(key) for key in context}
    if dataclasses.is_dataclass(schema):
        fields = [f for f in dataclasses.fields(schema) if f.init]
        required = {
            f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        known = {f.name for f in fields}
        return [f"{key} (missing)" for key in sorted(required - keys)] + [
            f"{key} (unknown field)" for key in sorted(keys - known)
        ]
    if is_typeddict(schema):
        required = set(getattr(schema, "__required_keys__", ()))
        return [f"{key} (missing)" for key in sorted(required - keys)]
    return []
