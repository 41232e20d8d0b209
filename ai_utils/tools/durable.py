"""`durable_tool`: declare whether a tool is safe to run twice (SPEC §14 "Tools that change things").

With durable sessions a process can die while a tool runs; the next process cannot know whether the call
finished. So every tool says ``idempotent``: a pending call of an idempotent tool runs again (with the same
``execution_id``), any other tool's pending call is answered with an error saying it may have partly run.
The declaration lives in ``tool.metadata["idempotent"]`` (and ``["writes"]``, which defaults to the opposite
of ``idempotent``), so a `BaseTool` from anywhere can carry it.

``execution_id`` (unique per call, stable across re-runs) reaches a tool through
``config["configurable"]["execution_id"]`` / ``ToolRuntime.config`` and, for a function that declares an
``execution_id`` parameter, as that keyword (hidden from the model's schema).
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from typing import Any

from langchain_core.runnables.config import ensure_config
from langchain_core.tools import BaseTool, StructuredTool, tool
from langchain_core.tools.base import create_schema_from_function

from ai_utils._utils import is_async_callable
from ai_utils.exceptions import UserError

__all__ = ["EXECUTION_ID", "current_execution_id", "declared_idempotent", "durable_tool", "wants_execution_id"]

EXECUTION_ID = "execution_id"


def current_execution_id() -> str:
    """The ``execution_id`` of the tool call running now (a fresh id outside durable sessions)."""
    configurable = ensure_config().get("configurable") or {}
    value = configurable.get(EXECUTION_ID)
    return value if isinstance(value, str) else uuid.uuid4().hex


def wants_execution_id(func: Callable[..., Any]) -> bool:
    """Whether ``func`` declares an ``execution_id`` parameter."""
    try:
        return EXECUTION_ID in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


def declared_idempotent(item: BaseTool) -> bool | None:
    """``tool.metadata["idempotent"]``, or ``None`` when the tool does not declare it."""
    value = (item.metadata or {}).get("idempotent")
    return value if isinstance(value, bool) else None


def _from_function(func: Callable[..., Any]) -> BaseTool:
    if not (func.__doc__ or "").strip():
        raise UserError(
            f"durable_tool({getattr(func, '__name__', func)!r}): the function has no docstring; the model needs "
            "a description. Add a docstring."
        )
    if not wants_execution_id(func):
        return tool(func)
    name = func.__name__
    schema = create_schema_from_function(name, func, filter_args=[EXECUTION_ID], parse_docstring=False)
    description = inspect.cleandoc(func.__doc__ or "")
    if is_async_callable(func):

        async def acall(**kwargs: Any) -> Any:
            return await func(**kwargs, execution_id=current_execution_id())

        return StructuredTool.from_function(coroutine=acall, name=name, description=description, args_schema=schema)

    def call(**kwargs: Any) -> Any:
        return func(**kwargs, execution_id=current_execution_id())

    return StructuredTool.from_function(func=call, name=name, description=description, args_schema=schema)


def durable_tool(
    tool_or_func: BaseTool | Callable[..., Any], *, idempotent: bool, writes: bool | None = None
) -> BaseTool:
    """Declare whether a tool may run twice; required for every tool of an agent with ``sessions=``.

    Example:
        ```python
        def refund(order_id: str, execution_id: str) -> str:
            \"\"\"Refund an order.\"\"\"
            return payments.refund(order_id, idempotency_key=execution_id)

        tools = [durable_tool(get_order, idempotent=True), durable_tool(refund, idempotent=True, writes=True)]
        ```

    Args:
        tool_or_func: a `BaseTool`, or a function with a docstring (an ``execution_id`` parameter is filled
            in per call and hidden from the model).
        idempotent: ``True`` when running the call again is harmless (a lookup, or a write keyed on
            ``execution_id``); a pending call then runs again after a crash. ``False``: it never runs twice
            on its own; the model gets an error result saying it may have partly run.
        writes: whether the tool changes something; defaults to ``not idempotent``.

    Returns:
        The tool (a `BaseTool` given is updated in place) with ``metadata["idempotent"]`` and
        ``metadata["writes"]``.

    Raises:
        UserError: ``idempotent``/``writes`` not a bool, or not a tool or documented function.
    """
    if not isinstance(idempotent, bool):
        raise UserError(f"durable_tool(..., idempotent=...) must be True or False, got {idempotent!r}.")
    if writes is not None and not isinstance(writes, bool):
        raise UserError(f"durable_tool(..., writes=...) must be True, False or None, got {writes!r}.")
    if isinstance(tool_or_func, BaseTool):
        item = tool_or_func
    elif callable(tool_or_func):
        item = _from_function(tool_or_func)
    else:
        raise UserError(f"durable_tool() takes a tool or a function, got {tool_or_func!r}.")
    item.metadata = {
        **(item.metadata or {}),
        "idempotent": idempotent,
        "writes": not idempotent if writes is None else writes,
    }
    return item
