"""The plumbing of `JevToolCaller` around its graph: argument checks, MCP tool entries, building outputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from langgraph.types import Command, GraphOutput
from pydantic import BaseModel, ValidationError

from ai_utils.exceptions import UserError
from ai_utils.jev import _tool_caller_core as core
from ai_utils.jev._tool_caller_graph import RunContext
from ai_utils.jev._tool_caller_types import (
    ConfidenceGate,
    JevBelow,
    JevGated,
    JevInterrupt,
    JevMetadata,
    JevOutput,
    JevParamChoice,
    JevParamsError,
    JevReturn,
    JevTool,
    JevToolChoice,
    to_json,
)
from ai_utils.tools._mcp_config import MCPServer

__all__ = [
    "Decision",
    "check_forced",
    "check_gate",
    "check_interrupt_on",
    "check_names",
    "mcp_entry",
    "normalize_tools",
    "resume",
    "result",
    "unknown_tool",
    "validate_context",
]

Decision = Literal["approve", "reject"]
_TOOL_FIELDS = frozenset({"name", "description", "func", "params"})


def normalize_tools(tools: Any) -> list[core.ToolEntry]:
    """Validate ``tools=``: `JevTool`s or mappings, unique non-empty names, non-empty descriptions."""
    if isinstance(tools, str | bytes | Mapping | JevTool) or not isinstance(tools, Sequence):
        raise UserError(f"`tools` must be a list of JevTool (or mappings), got {type(tools).__name__}.")
    entries: list[core.ToolEntry] = []
    for item in tools:
        if isinstance(item, Mapping):
            unknown = set(item) - _TOOL_FIELDS
            if unknown:
                raise UserError(f"Tool keys {sorted(unknown)!r} are unknown; a tool has {sorted(_TOOL_FIELDS)!r}.")
            try:
                item = JevTool(**item)
            except TypeError as error:
                raise UserError(
                    f"Tool {item.get('name')!r} needs `name`, `description` and `func` ({error})."
                ) from None
        if not isinstance(item, JevTool):
            raise UserError(f"Cannot use {type(item).__name__} as a tool; pass `JevTool(name, description, func)`.")
        if not isinstance(item.name, str) or not item.name.strip():
            raise UserError(f"Tool name {item.name!r} must be a non-empty string.")
        if not isinstance(item.description, str) or not item.description.strip():
            raise UserError(f"Tool {item.name!r} needs a non-empty `description`: Jev picks tools by it.")
        if not callable(item.func):
            raise UserError(f"Tool {item.name!r}: `func` must be callable, got {type(item.func).__name__}.")
        if item.params is not None and not callable(item.params):
            core.check_static_shape(item.name, item.params)
        entries.append(core.ToolEntry(item.name, item.description, item.func, item.params))
    check_names([entry.name for entry in entries])
    return entries


def check_names(names: Sequence[str]) -> None:
    """Raise `UserError` naming every duplicate tool name."""
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise UserError(f"Duplicate tool names {duplicates!r}: Jev picks tools by name. Rename one of each.")


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
    if gate is None:
        return ConfidenceGate()
    if isinstance(gate, ConfidenceGate):
        return gate
    if isinstance(gate, Mapping):
        unknown = set(gate) - {"min_confidence", "tools"}
        if unknown:
            raise UserError(f"confidence_gate keys {sorted(unknown)!r} are unknown; use `min_confidence` and `tools`.")
        return ConfidenceGate(min_confidence=gate.get("min_confidence"), tools=gate.get("tools") or {})
    raise UserError(f"`confidence_gate` must be a ConfidenceGate or a mapping, got {type(gate).__name__}.")


def check_forced(params: Any) -> dict[str, Any]:
    """``call_tool(params=...)`` as a dict."""
    if not isinstance(params, Mapping):
        raise JevParamsError(f"call_tool: `params` must be a mapping of parameter name -> value, got {params!r}.")
    return dict(params)


def unknown_tool(tool: str, tools: Mapping[str, Any]) -> None:
    """Raise `UserError` for a ``call_tool`` of a tool this call does not have."""
    raise UserError(f"call_tool: unknown tool {tool!r}; the tools are {sorted(tools)!r}.")


def resume(decision: Decision, thread_id: str | None, pending: Sequence[Any]) -> Command[Any]:
    """The resume command for the thread's pending proposal; `UserError` when nothing is pending."""
    if not pending:
        raise UserError(
            f"Thread {thread_id!r} has no pending proposal to {decision}. Send a request first; "
            "only tools listed in `interrupt_on` pause for approval."
        )
    return Command(resume=decision)


def mcp_entry(server: MCPServer, tool: Any) -> core.ToolEntry:
    """An MCP tool as a tool entry: prefixed name, server description first, params by unprefixed name."""
    original = str((tool.metadata or {}).get("mcp_tool", tool.name))
    description = (tool.description or original).strip()
    if server.description and server.description.strip():
        description = f"{server.description.strip()}\n{description}"
    params = (server.params or {}).get(original)

    async def func(params: Mapping[str, Any]) -> Any:
        arguments = {name: to_json(value) for name, value in params.items()}
        return mcp_value(await tool.ainvoke(arguments))

    return core.ToolEntry(tool.name, description, func, params, server)


def mcp_value(content: Any) -> Any:
    """An MCP result as a value: the text when it is text only, else the content blocks."""
    if isinstance(content, list) and content and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "".join(str(block.get("text", "")) for block in content)
    return content


def params_out(state: Mapping[str, Any], objects: Mapping[str, Any]) -> dict[str, JevParamChoice]:
    """The output params: original objects where this run has them, else their JSON."""
    return {
        name: JevParamChoice(
            value=objects[name] if name in objects else picked["value"], confidence=picked["confidence"]
        )
        for name, picked in (state.get("params") or {}).items()
    }


def result(output: GraphOutput[Any], run: RunContext, debug: bool) -> JevOutput:
    """The `JevOutput` of one graph run: interrupt, gated, rejected or return."""
    state: Mapping[str, Any] = output.value
    tool_state = state.get("tool") or {}
    tool = JevToolChoice(name=tool_state.get("name", ""), confidence=tool_state.get("confidence", 0.0))
    if run.arguments is not None:
        objects: Mapping[str, Any] = run.arguments
    elif run.candidates is not None:
        objects = {n: run.candidates[n][p["index"]] for n, p in (state.get("params") or {}).items()}
    else:
        objects = {}  # rejected after a resume: the candidates were not resolved again
    params = params_out(state, objects)
    metadata = debug_metadata(state, run) if debug else None
    if output.interrupts:
        question = str(output.interrupts[0].value.get("question", ""))
        return JevInterrupt(question=question, tool=tool, params=params, metadata=metadata)
    outcome = state.get("outcome")
    if outcome == "gated":
        below = [JevBelow(**item) for item in state.get("below") or []]
        return JevGated(tool=tool, params=params, below=below, metadata=metadata)
    if outcome == "rejected":
        return JevReturn(value=None, tool=tool, params=params, rejected=True, metadata=metadata)
    return JevReturn(value=run.value, tool=tool, params=params, metadata=metadata)


def debug_metadata(state: Mapping[str, Any], run: RunContext) -> JevMetadata:
    """The ``debug=True`` metadata; built from state and the run, never from ``context``."""
    params = state.get("params") or {}
    usage = state.get("usage") or {"input_tokens": 0, "output_tokens": 0, "cost": None, "calls": 0}
    return JevMetadata(
        selected_tool=state.get("tool"),
        selected_params={name: dict(picked) for name, picked in params.items()},
        arguments={name: picked["value"] for name, picked in params.items()},
        usage=dict(usage),
        state=run.seen_state or core.jev_state(run.prompt, state.get("message_history") or [], None),
    )


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
