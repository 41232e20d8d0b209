"""Parse a fake model's reply into a structured-output schema.

A reply counts when its first matching tool call's args, or else its text content (JSON, optionally
inside a ```json fence), validates against the schema: pydantic classes give instances, TypedDicts
and other types are validated with a pydantic `TypeAdapter` and give plain data, JSON-schema dicts
give the dict after a check of its type and required keys (LangChain does not validate these at all).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, TypeAdapter

__all__ = ["StructuredParser", "schema_name"]

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)


def schema_name(schema: Mapping[str, Any] | type) -> str:
    """The tool name LangChain derives for ``schema`` (it raises ValueError for an untitled JSON schema)."""
    return str(convert_to_openai_tool(schema)["function"]["name"])


class StructuredParser:
    """Turns an `AIMessage` into data validated against one schema.

    Args:
        schema: a pydantic model class, a TypedDict (or any type pydantic can validate), or a JSON-schema
            / OpenAI-tool dict.
    """

    def __init__(self, schema: Mapping[str, Any] | type) -> None:
        self.schema = schema
        self.name = schema_name(schema)

    def parse(self, message: BaseMessage) -> Any:
        """Parse and validate ``message``.

        Args:
            message: the model reply.

        Returns:
            The validated value.

        Raises:
            OutputParserException: the reply holds no JSON, or the JSON misses the schema's required keys.
            pydantic.ValidationError: the JSON does not fit a pydantic/TypedDict schema.
        """
        data = self._raw_data(message)
        schema = self.schema
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return schema.model_validate(data)
        if isinstance(schema, type):
            return TypeAdapter(schema).validate_python(data)
        self._check_json_schema(data, schema)
        return data

    def _raw_data(self, message: BaseMessage) -> Any:
        calls = message.tool_calls if isinstance(message, AIMessage) else []
        if calls:
            chosen = next((c for c in calls if c["name"] == self.name), calls[0])
            return chosen["args"]
        text = message.text.strip()
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group(1).strip()
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise OutputParserException(
                f"Expected a JSON reply for {self.name}, got {text[:200]!r}: {exc}. "
                "Script a reply whose content is JSON, or a tool call whose args fit the schema.",
                llm_output=text,
            ) from exc

    def _check_json_schema(self, data: Any, schema: Mapping[str, Any]) -> None:
        function = schema.get("function", schema)
        params = function.get("parameters", function)
        if params.get("type", "object") == "object":
            if not isinstance(data, dict):
                raise OutputParserException(
                    f"Expected a JSON object for {self.name}, got {data!r}.",
                    llm_output=json.dumps(data),
                )
            missing = [key for key in params.get("required", []) if key not in data]
            if missing:
                raise OutputParserException(
                    f"The reply for {self.name} misses required keys {missing!r}: {data!r}.",
                    llm_output=json.dumps(data),
                )
