"""The building blocks of a loop definition: steps, transitions and ``ctx`` bindings.

Each builder checks the shape of its own arguments; `define_loop` checks how they fit together.
Every block is a frozen dataclass with a JSON form (``to_json``), so a loop round-trips through JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel

from ai_utils.exceptions import LoopDefinitionError

__all__ = [
    "END",
    "AgentStep",
    "Next",
    "Otherwise",
    "RequireTool",
    "Step",
    "ToolStep",
    "When",
    "agent_step",
    "ctx",
    "is_binding",
    "otherwise",
    "require_tool",
    "tool_step",
    "when",
]

END = "end"
BINDING_KEY = "$context"
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*")


def check_path(path: object, *, where: str, step_key: str | None = None) -> str:
    """``path`` if it is a dotted context path such as ``request.order_id``, else `LoopDefinitionError`."""
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise LoopDefinitionError(
            f"{where}: {path!r} is not a context path. Use dotted keys such as 'request.order_id'.", step_key=step_key
        )
    return path


def ctx(path: str) -> dict[str, str]:
    """A binding to a value of the loop context, resolved when the step runs: ``{"$context": path}``.

    Only this exact one-key object is replaced (recursively inside ``input`` and ``result``); strings are
    never templated.

    Args:
        path: a dotted path, e.g. ``"request.order_id"`` or ``"triage.category"``.

    Raises:
        LoopDefinitionError: ``path`` is not a dotted path.
    """
    return {BINDING_KEY: check_path(path, where="ctx()")}


def is_binding(value: object) -> bool:
    """Whether ``value`` is exactly ``{"$context": "<path>"}``."""
    return isinstance(value, Mapping) and len(value) == 1 and isinstance(value.get(BINDING_KEY), str)


def check_bindings(value: object, *, where: str, step_key: str | None) -> None:
    """Check every binding inside ``value`` (a JSON-like tree) has a valid path."""
    if is_binding(value):
        check_path(value[BINDING_KEY], where=where, step_key=step_key)  # type: ignore[index]
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_bindings(item, where=f"{where}.{key}", step_key=step_key)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_bindings(item, where=f"{where}[{index}]", step_key=step_key)


# --- transitions --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class When:
    """Go to ``target`` when the CEL expression ``expr`` is true over the context."""

    expr: str
    target: str

    def to_json(self) -> dict[str, str]:
        """The JSON form ``{"when": expr, "target": target}``."""
        return {"when": self.expr, "target": self.target}


@dataclass(frozen=True, slots=True)
class Otherwise:
    """Go to ``target`` when no earlier `when` matched."""

    target: str

    def to_json(self) -> dict[str, str]:
        """The JSON form ``{"otherwise": target}``."""
        return {"otherwise": self.target}


Next: TypeAlias = "str | tuple[When | Otherwise, ...]"


def when(expr: str, target: str) -> When:
    """A conditional transition: ``when("triage.needs_refund == true", "refund")``.

    Args:
        expr: a CEL expression over the context (compiled at `define_loop`; never Python ``eval``).
        target: a step key or ``"end"``.
    """
    if not isinstance(expr, str) or not expr.strip():
        raise LoopDefinitionError(f"when() needs a CEL expression string, got {expr!r}.")
    if not isinstance(target, str) or not target:
        raise LoopDefinitionError(f"when({expr!r}, ...) needs a target step key or 'end', got {target!r}.")
    return When(expr, target)


def otherwise(target: str) -> Otherwise:
    """The fallback transition, last in a ``next=[when(...), ...]`` list."""
    if not isinstance(target, str) or not target:
        raise LoopDefinitionError(f"otherwise() needs a target step key or 'end', got {target!r}.")
    return Otherwise(target)


def _next(value: object, *, where: str) -> Next:
    if isinstance(value, str):
        if not value:
            raise LoopDefinitionError(f"{where}: `next` is empty; use a step key or 'end'.")
        return value
    if isinstance(value, Sequence) and value and all(isinstance(v, When | Otherwise) for v in value):
        items = tuple(value)
        for index, item in enumerate(items[:-1]):
            if isinstance(item, Otherwise):
                raise LoopDefinitionError(
                    f"{where}: otherwise({item.target!r}) at position {index} hides the transitions after it; "
                    "put it last."
                )
        return items
    raise LoopDefinitionError(
        f"{where}: `next` must be a step key, 'end', or a list of when(...)/otherwise(...), got {value!r}."
    )


def next_to_json(value: Next) -> Any:
    """The JSON form of a ``next``."""
    return value if isinstance(value, str) else [item.to_json() for item in value]


def next_from_json(value: Any) -> Next:
    """Rebuild a ``next`` from its JSON form."""
    if isinstance(value, list):
        items: list[When | Otherwise] = []
        for item in value:
            if isinstance(item, Mapping) and "when" in item:
                items.append(when(item["when"], item["target"]))
            elif isinstance(item, Mapping) and "otherwise" in item:
                items.append(otherwise(item["otherwise"]))
            else:
                raise LoopDefinitionError(
                    f"Unknown transition {item!r}; expected {{'when', 'target'}} or {{'otherwise'}}."
                )
        return _next(items, where="from_json")
    return _next(value, where="from_json")


# --- steps --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequireTool:
    """``tool_choice`` that makes the step call ``name`` before it may answer."""

    name: str


def require_tool(name: str) -> RequireTool:
    """Force an agent step to call the tool ``name`` (sent as the model's ``tool_choice`` until it has)."""
    if not isinstance(name, str) or not name:
        raise LoopDefinitionError(f"require_tool() needs a tool name, got {name!r}.")
    return RequireTool(name)


OutputSchema: TypeAlias = "type[BaseModel] | dict[str, Any] | None"


@dataclass(frozen=True, slots=True)
class AgentStep:
    """A model turn (a `create_agent` run); its answer is saved under the step key."""

    prompt: str | None
    tools: tuple[str, ...]
    output: OutputSchema
    tool_choice: RequireTool | str | None
    next: Next
    label: str | None = None
    kind: Literal["agent"] = field(default="agent", init=False)

    def output_json_schema(self) -> dict[str, Any] | None:
        """The ``output`` as a JSON schema (what `to_json` stores)."""
        if self.output is None:
            return None
        if isinstance(self.output, dict):
            return dict(self.output)
        return self.output.model_json_schema()

    def to_json(self) -> dict[str, Any]:
        """The JSON form of the step."""
        choice: Any = self.tool_choice
        if isinstance(choice, RequireTool):
            choice = {"type": "tool", "name": choice.name}
        return {
            "type": "agent",
            "prompt": self.prompt,
            "tools": list(self.tools),
            "output": self.output_json_schema(),
            "tool_choice": choice,
            "next": next_to_json(self.next),
            "label": self.label,
        }


@dataclass(frozen=True, slots=True)
class ToolStep:
    """A direct tool call, no model; its result is saved under ``save_as`` (default: the step key)."""

    tool: str
    input: dict[str, Any]
    save_as: str | None
    next: Next
    label: str | None = None
    kind: Literal["tool"] = field(default="tool", init=False)

    def to_json(self) -> dict[str, Any]:
        """The JSON form of the step."""
        return {
            "type": "tool",
            "tool": self.tool,
            "input": self.input,
            "save_as": self.save_as,
            "next": next_to_json(self.next),
            "label": self.label,
        }


Step: TypeAlias = "AgentStep | ToolStep"


def _label(label: object) -> str | None:
    if label is not None and not isinstance(label, str):
        raise LoopDefinitionError(f"`label` must be a str, got {label!r}.")
    return label


def agent_step(
    *,
    prompt: str | None = None,
    tools: Sequence[str] = (),
    output: type[BaseModel] | dict[str, Any] | None = None,
    tool_choice: RequireTool | Literal["auto", "any", "none"] | None = None,
    next: str | Sequence[When | Otherwise],
    label: str | None = None,
) -> AgentStep:
    """A model turn: the model sees the context, may call ``tools`` (each call permission-checked) and answers.

    The step runs a fresh `create_agent` graph: ``prompt`` is its system prompt and the loop context so far
    is its one human message (``Loop context (JSON):`` and the JSON). The answer is saved in the context under
    the step key: ``{"text": ...}``, or the ``output`` model's fields.

    Args:
        prompt: the step's system prompt.
        tools: names of tools (given to `LoopRunner`) the model may call.
        output: a pydantic model (or JSON schema dict) for a structured answer.
        tool_choice: `require_tool(name)`, or ``"auto"``/``"any"``/``"none"``.
        next: a step key, ``"end"``, or ``[when(expr, target), ..., otherwise(target)]``.
        label: a display name.

    Raises:
        LoopDefinitionError: a malformed argument.
    """
    if prompt is not None and not isinstance(prompt, str):
        raise LoopDefinitionError(f"agent_step(prompt=...) must be a str, got {prompt!r}.")
    if isinstance(tools, str) or not all(isinstance(t, str) and t for t in tools):
        raise LoopDefinitionError(f"agent_step(tools=...) must be a list of tool names, got {tools!r}.")
    if output is not None and not (
        isinstance(output, dict) or (isinstance(output, type) and issubclass(output, BaseModel))
    ):
        raise LoopDefinitionError(f"agent_step(output=...) must be a pydantic model class, got {output!r}.")
    if (
        tool_choice is not None
        and not isinstance(tool_choice, RequireTool)
        and tool_choice not in ("auto", "any", "none")
    ):
        raise LoopDefinitionError(
            f"agent_step(tool_choice=...) must be require_tool(name), 'auto', 'any' or 'none', got {tool_choice!r}."
        )
    return AgentStep(prompt, tuple(tools), output, tool_choice, _next(next, where="agent_step"), _label(label))


def tool_step(
    tool: str,
    *,
    input: Mapping[str, Any],
    save_as: str | None = None,
    next: str | Sequence[When | Otherwise],
    label: str | None = None,
) -> ToolStep:
    """A direct tool call (no model), permission-checked like the model's calls.

    Args:
        tool: the tool's name (given to `LoopRunner`).
        input: the tool's arguments; ``ctx("path")`` values are replaced by context values, nothing else is.
        save_as: where the result goes in the context (a dotted path; default: the step key).
        next: a step key, ``"end"``, or ``[when(expr, target), ..., otherwise(target)]``.
        label: a display name.

    Raises:
        LoopDefinitionError: a malformed argument.
    """
    if not isinstance(tool, str) or not tool:
        raise LoopDefinitionError(f"tool_step() needs a tool name, got {tool!r}.")
    if not isinstance(input, Mapping):
        raise LoopDefinitionError(f"tool_step({tool!r}, input=...) must be a mapping of arguments, got {input!r}.")
    check_bindings(input, where=f"tool_step({tool!r}).input", step_key=None)
    if save_as is not None:
        check_path(save_as, where=f"tool_step({tool!r}, save_as=...)")
    return ToolStep(tool, dict(input), save_as, _next(next, where=f"tool_step({tool!r})"), _label(label))


def step_from_json(data: Mapping[str, Any]) -> Step:
    """Rebuild a step from its JSON form."""
    kind = data.get("type")
    if kind == "agent":
        choice = data.get("tool_choice")
        if isinstance(choice, Mapping):
            choice = require_tool(str(choice.get("name")))
        return agent_step(
            prompt=data.get("prompt"),
            tools=list(data.get("tools") or ()),
            output=data.get("output"),
            tool_choice=choice,
            next=next_from_json(data.get("next")),
            label=data.get("label"),
        )
    if kind == "tool":
        return tool_step(
            data.get("tool"),  # type: ignore[arg-type]
            input=data.get("input") or {},
            save_as=data.get("save_as"),
            next=next_from_json(data.get("next")),
            label=data.get("label"),
        )
    raise LoopDefinitionError(f"Unknown step type {kind!r}; expected 'agent' or 'tool'.")
