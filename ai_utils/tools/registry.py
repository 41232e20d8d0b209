"""`ToolRegistry`: plain tool definitions -> LangChain `StructuredTool`s, looked up by name.

A definition is ``{name, description, schema, func}`` (a mapping, or any object with those attributes,
e.g. a dataclass). ``func`` is called with the validated schema fields as keyword arguments
(``def get_weather(city: str)``) and may be sync or async:

- a sync ``func`` becomes ``StructuredTool(func=...)``; async runs use LangChain's default, which runs it
  in a worker thread, so it never blocks the event loop;
- an async ``func`` becomes ``StructuredTool(coroutine=...)`` plus a sync path over
  `ai_utils._utils.run_sync` (LangChain has none), which refuses, with guidance, inside a running loop.

Non-string results are returned as they are; LangChain serialises them into the `ToolMessage`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel

from ai_utils._utils import is_async_callable, run_sync
from ai_utils.exceptions import UserError
from ai_utils.tools.durable import current_execution_id, durable_tool, wants_execution_id

__all__ = ["ToolRegistry"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FIELDS = ("name", "description", "schema", "func")


def _field(definition: Any, key: str, index: int) -> Any:
    if isinstance(definition, Mapping):
        if key not in definition:
            raise UserError(
                f"Tool definition #{index} {definition!r} lacks {key!r}. "
                "Each definition needs `name`, `description`, `schema` and `func`."
            )
        return definition[key]
    if not hasattr(definition, key):
        raise UserError(
            f"Tool definition #{index} {definition!r} lacks {key!r}. "
            "Pass a mapping (or object) with `name`, `description`, `schema` and `func`."
        )
    return getattr(definition, key)


def _fields_of(schema: type[BaseModel], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Validate once more so defaults are filled in; LangChain passes only the keys the model sent."""
    model = schema.model_validate(dict(kwargs))
    return {name: getattr(model, name) for name in type(model).model_fields}


def _extra(func: Callable[..., Any]) -> Callable[[], dict[str, Any]]:
    """The keyword arguments filled in per call: ``execution_id`` for a func that declares it (SPEC §14)."""
    if not wants_execution_id(func):
        return dict
    return lambda: {"execution_id": current_execution_id()}


def _sync_caller(func: Callable[..., Any], schema: type[BaseModel]) -> Callable[..., Any]:
    extra = _extra(func)

    def call(**kwargs: Any) -> Any:
        return func(**_fields_of(schema, kwargs), **extra())

    return call


def _async_callers(
    func: Callable[..., Awaitable[Any]], schema: type[BaseModel], name: str
) -> tuple[Callable[..., Any], Callable[..., Awaitable[Any]]]:
    extra = _extra(func)

    async def acall(**kwargs: Any) -> Any:
        return await func(**_fields_of(schema, kwargs), **extra())

    def call(**kwargs: Any) -> Any:
        return run_sync(lambda: acall(**kwargs), what=f"the sync call of async tool {name!r}")

    return call, acall


def build_tool(definition: Any, index: int = 0) -> StructuredTool:
    """Turn one definition into a `StructuredTool` (see the module docstring).

    Raises:
        UserError: a field is missing, empty or of the wrong type.
    """
    name, description, schema, func = (_field(definition, key, index) for key in _FIELDS)
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(f"Tool name {name!r} is invalid. Use 1-64 letters, digits, `_` or `-`, e.g. 'get_weather'.")
    if not isinstance(description, str) or not description.strip():
        raise UserError(f"Tool {name!r} needs a non-empty description: the model reads it to decide when to call it.")
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise UserError(
            f"Tool {name!r} has schema {schema!r}, which is not a pydantic model class. "
            "Pass e.g. `class Args(BaseModel): city: str` (use an empty model for no arguments)."
        )
    if not callable(func):
        raise UserError(f"Tool {name!r} has func {func!r}, which is not callable. Pass a (async) function.")
    if is_async_callable(func):
        call, acall = _async_callers(func, schema, name)
        built = StructuredTool.from_function(
            func=call, coroutine=acall, name=name, description=description, args_schema=schema
        )
    else:
        built = StructuredTool.from_function(
            func=_sync_caller(func, schema), name=name, description=description, args_schema=schema
        )
    return _declare(built, definition)


def _declare(built: StructuredTool, definition: Any) -> StructuredTool:
    """Apply the optional ``idempotent`` / ``writes`` keys.

    ``idempotent`` is required with durable sessions; ``writes`` alone only makes the tool's calls run alone.
    """
    if isinstance(definition, Mapping):
        idempotent, writes = definition.get("idempotent"), definition.get("writes")
    else:
        idempotent, writes = getattr(definition, "idempotent", None), getattr(definition, "writes", None)
    if idempotent is None and writes is None:
        return built
    if idempotent is None:
        if not isinstance(writes, bool):
            raise UserError(f"Tool {built.name!r} has writes={writes!r}; use True or False.")
        built.metadata = {**(built.metadata or {}), "writes": writes}
        return built
    durable_tool(built, idempotent=idempotent, writes=writes)
    return built


class ToolRegistry:
    """Build LangChain tools from plain definitions and look them up by name.

    Example:
        ```python
        class City(BaseModel):
            city: str

        registry = ToolRegistry([
            {"name": "get_weather", "description": "Weather for a city", "schema": City,
             "func": lambda city: f"{city}: sunny"},
        ])
        agent = Agent(tools=registry.all_tools)
        ```

    Args:
        defs: definitions ``{name, description, schema, func}``; ``func`` may be sync or async. Optional keys
            ``idempotent`` (see `durable_tool`; required with durable sessions) and ``writes`` (the tool changes
            something: its calls run alone; defaults to ``not idempotent``).

    Raises:
        UserError: a definition is incomplete or invalid, or two share a name.
    """

    def __init__(self, defs: Iterable[Any]) -> None:
        self._tools: dict[str, StructuredTool] = {}
        for index, definition in enumerate(defs):
            tool = build_tool(definition, index)
            if tool.name in self._tools:
                raise UserError(f"Tool name {tool.name!r} is defined twice. Give every tool a unique name.")
            self._tools[tool.name] = tool

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)!r})"

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    @property
    def names(self) -> list[str]:
        """The tool names, in definition order."""
        return list(self._tools)

    @property
    def all_tools(self) -> list[BaseTool]:
        """Every tool, in definition order."""
        return list(self._tools.values())

    def get_tool(self, name: str) -> BaseTool:
        """The tool called ``name``.

        Raises:
            UserError: no tool has that name (the message lists the known names).
        """
        try:
            return self._tools[name]
        except KeyError:
            raise UserError(
                f"Unknown tool {name!r}. Known tools: {', '.join(self._tools) or '(none)'}. "
                "Use one of these names or add a definition for it."
            ) from None

    def get_tools(self, *names: str) -> list[BaseTool]:
        """The tools called ``names``, in the order given.

        Raises:
            UserError: one of the names is unknown.
        """
        return [self.get_tool(name) for name in names]
