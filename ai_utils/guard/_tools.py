"""What guardrails know about a tool: destructive, explicitly read-only, and whether its arguments fit its schema."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

__all__ = ["is_destructive", "is_read_only", "name_words", "schema_errors"]

# A tool whose name holds one of these words changes or deletes things (``delete_user``, ``deleteUser``,
# ``Delete-User``, ``DROP_TABLE``, ``drop.table``, ``users__delete``).
_DESTRUCTIVE_WORDS = frozenset(
    {"delete", "drop", "remove", "destroy", "purge", "truncate", "wipe", "erase", "rm", "rmdir", "unlink", "execute"}
)
# camelCase / PascalCase / UPPER words and digit runs; every other character separates words.
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


@functools.lru_cache(maxsize=4096)  # an agent calls the same few tools over and over
def name_words(name: str) -> tuple[str, ...]:
    """The lower-case words of a tool name, whatever its case and separators (``"deleteUser"`` -> delete, user)."""
    if not name.isascii():
        name = unicodedata.normalize("NFKC", name)
        name = "".join(c for c in name if unicodedata.category(c) != "Cf")
    return tuple(word.lower() for word in _WORD.findall(name))


def _metadata(tool: BaseTool | None) -> Mapping[str, Any]:
    metadata = tool.metadata if tool is not None else None
    return metadata if isinstance(metadata, Mapping) else {}


def is_destructive(name: str, tool: BaseTool | None) -> bool:
    """Whether the tool changes or deletes things.

    Metadata ``destructive=True`` / ``writes=True``, an MCP ``destructiveHint``, or a name with a word like
    ``delete``, ``drop``, ``remove``, ``destroy``, ``purge``, ``truncate``, ``wipe``, ``erase``, ``rm``, ``execute`` in
    any case and with any separator (``delete_user``, ``deleteUser``, ``Delete-User``, ``DROP_TABLE``,
    ``drop.table``, ``files__rm``). Metadata ``destructive=False`` opts a tool with such a name out.
    """
    metadata = _metadata(tool)
    if "destructive" in metadata:
        return bool(metadata["destructive"])
    if metadata.get("writes") is True:
        return True
    if metadata.get("destructiveHint") is True and metadata.get("readOnlyHint") is not True:
        return True
    return not _DESTRUCTIVE_WORDS.isdisjoint(name_words(name))


def is_read_only(name: str, tool: BaseTool | None) -> bool:
    """Whether the tool is explicitly read-only, so a failing policy may audit instead of blocking.

    Metadata ``read_only=True``, ``writes=False`` or an MCP ``readOnlyHint``; unknown tools are never read-only.
    """
    if tool is None or is_destructive(name, tool):
        return False
    metadata = _metadata(tool)
    return metadata.get("read_only") is True or metadata.get("readOnlyHint") is True or metadata.get("writes") is False


def _pydantic_errors(schema: type[BaseModel], args: Mapping[str, Any]) -> list[str]:
    try:
        schema.model_validate(dict(args))
    except ValidationError as error:
        # include_input=False: the rejected values may be secrets; the model gets where and why, not what.
        return [
            f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
            for e in error.errors(include_input=False, include_url=False)
        ]
    return []


def _json_schema_errors(schema: Mapping[str, Any], args: Mapping[str, Any]) -> list[str]:
    try:
        import jsonschema  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - jsonschema comes with the `mcp` extra, where dict schemas come from
        return []
    validator = jsonschema.Draft202012Validator(dict(schema))
    return [
        f"{'.'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.validator} constraint failed"
        for e in validator.iter_errors(dict(args))
    ]


_SCHEMAS: dict[int, tuple[BaseTool, Any]] = {}


def _call_schema(tool: BaseTool) -> Any:
    """``tool.tool_call_schema``, kept per tool: LangChain recomputes it on every access (~25 µs)."""
    cached = _SCHEMAS.get(id(tool))
    if cached is not None and cached[0] is tool:
        return cached[1]
    schema = tool.tool_call_schema
    if len(_SCHEMAS) >= 1024:
        _SCHEMAS.clear()
    _SCHEMAS[id(tool)] = (tool, schema)
    return schema


def schema_errors(tool: BaseTool | None, args: object) -> list[str]:
    """Why ``args`` do not fit the schema the model was shown for ``tool`` (empty when they do).

    Validator errors other than validation failures propagate: they are policy failures, not bad arguments.
    """
    if not isinstance(args, Mapping):
        return [f"(arguments): expected an object, got {type(args).__name__}"]
    if tool is None:
        return []
    schema = _call_schema(tool)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return _pydantic_errors(schema, args)
    if isinstance(schema, Mapping):
        return _json_schema_errors(schema, args)
    return []
