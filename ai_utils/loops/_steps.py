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
from ai_utils.loops._limits import (
    MAX_DEPTH,
    MAX_EXPRESSION_CHARS,
    MAX_NAME_CHARS,
    MAX_TEXT_CHARS,
    MAX_TRANSITIONS,
    data_problem,
)

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
    "check_name",
    "ctx",
    "fields_of",
    "is_binding",
    "otherwise",
    "require_tool",
    "tool_step",
    "when",
]

END = "end"
BINDING_KEY = "$context"
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*")


def check_name(value: object, *, what: str, step_key: str | None = None) -> str:
    """``value`` if it is a non-empty str of at most `MAX_NAME_CHARS` characters, else `LoopDefinitionError`."""
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        shown = f"a str of {len(value)} characters" if isinstance(value, str) and value else repr(value)[:80]
        raise LoopDefinitionError(
            f"{what} must be a non-empty name of at most {MAX_NAME_CHARS} characters, got {shown}.", step_key=step_key
        )
    return value


def fields_of(data: object, *, where: str, allowed: frozenset[str], step_key: str | None = None) -> Mapping[str, Any]:
    """``data`` if it is a JSON object with only ``allowed`` keys (`Loop.from_json`), else `LoopDefinitionError`."""
    if not isinstance(data, Mapping):
        raise LoopDefinitionError(
            f"{where} must be a JSON object, got a {type(data).__name__}: {repr(data)[:80]}.", step_key=step_key
        )
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise LoopDefinitionError(
            f"{where} has unknown field(s) {[k[:40] for k in unknown][:5]!r}; allowed: {sorted(allowed)!r}.",
            step_key=step_key,
        )
    return data


def check_path(path: object, *, where: str, step_key: str | None = None) -> str:
    """``path`` if it is a dotted context path such as ``request.order_id``, else `LoopDefinitionError`."""
    if not isinstance(path, str) or len(path) > MAX_NAME_CHARS or not _PATH.fullmatch(path):
        raise LoopDefinitionError(
            f"{where}: {repr(path)[:80]} is not a context path. Use dotted keys such as 'request.order_id'.",
            step_key=step_key,
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


def check_bindings(value: object, *, where: str, step_key: str | None, depth: int = 0) -> None:
    """Check every binding inside ``value`` (a JSON-like tree, at most `MAX_DEPTH` deep) has a valid path."""
    if depth > MAX_DEPTH:
        raise LoopDefinitionError(f"{where}: nested deeper than {MAX_DEPTH} levels; flatten it.", step_key=step_key)
    if is_binding(value):
        check_path(value[BINDING_KEY], where=where, step_key=step_key)  # type: ignore[index]
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_bindings(item, where=f"{where}.{str(key)[:40]}", step_key=step_key, depth=depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_bindings(item, where=f"{where}[{index}]", step_key=step_key, depth=depth + 1)


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
        raise LoopDefinitionError(f"when() needs a CEL expression string, got {repr(expr)[:80]}.")
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise LoopDefinitionError(
            f"when() got an expression of {len(expr)} characters; the limit is {MAX_EXPRESSION_CHARS}. "
            "Split the condition over several steps or compute it in a step."
        )
    check_name(target, what=f"when({expr[:60]!r}, target)")
    return When(expr, target)


def otherwise(target: str) -> Otherwise:
    """The fallback transition, last in a ``next=[when(...), ...]`` list."""
    check_name(target, what="otherwise(target)")
    return Otherwise(target)


def _next(value: object, *, where: str) -> Next:
    if isinstance(value, str):
        if not value:
            raise LoopDefinitionError(f"{where}: `next` is empty; use a step key or 'end'.")
        return check_name(value, what=f"{where}: `next`")
    if isinstance(value, Sequence) and len(value) > MAX_TRANSITIONS:
        raise LoopDefinitionError(f"{where}: `next` has {len(value)} transitions; the limit is {MAX_TRANSITIONS}.")
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
        f"{where}: `next` must be a step key, 'end', or a list of when(...)/otherwise(...), got {repr(value)[:80]}."
    )


def next_to_json(value: Next) -> Any:
    """The JSON form of a ``next``."""
    return value if isinstance(value, str) else [item.to_json() for item in value]


_WHEN_FIELDS = frozenset({"when", "target"})
_OTHERWISE_FIELDS = frozenset({"otherwise"})


def next_from_json(value: Any, *, where: str) -> Next:
    """Rebuild a ``next`` from its JSON form."""
    if isinstance(value, list):
        if len(value) > MAX_TRANSITIONS:
            raise LoopDefinitionError(f"{where}: `next` has {len(value)} transitions; the limit is {MAX_TRANSITIONS}.")
        items: list[When | Otherwise] = []
        for index, item in enumerate(value):
            if isinstance(item, Mapping) and set(item) == _WHEN_FIELDS:
                items.append(when(item["when"], item["target"]))
            elif isinstance(item, Mapping) and set(item) == _OTHERWISE_FIELDS:
                items.append(otherwise(item["otherwise"]))
            else:
                raise LoopDefinitionError(
                    f"{where}: transition {index} is {repr(item)[:80]}; expected {{'when': expr, 'target': key}} "
                    "or {'otherwise': key}."
                )
        return _next(items, where=where)
    return _next(value, where=where)


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
    output_model: type[BaseModel] | None = field(default=None, compare=False, repr=False)
    """What validates the answer: ``output`` itself, or the model built from a JSON-schema ``output``."""

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
    return None if label is None else check_name(label, what="`label`")


_MAX_TOOLS = 128


def _output(output: object) -> type[BaseModel] | None:
    """The model that validates a step's answer: ``output`` itself, or one built from a JSON schema."""
    if output is None:
        return None
    if isinstance(output, type) and issubclass(output, BaseModel):
        return output
    if isinstance(output, Mapping):
        problem = data_problem(output, allow_tuples=False)
        if problem is not None:
            raise LoopDefinitionError(f"agent_step(output=...) is not a bounded JSON schema: {problem}.")
        from ai_utils.loops._schema import model_from_schema

        return model_from_schema(output, where="agent_step(output=...)")
    raise LoopDefinitionError(
        f"agent_step(output=...) must be a pydantic model class or a JSON schema dict, got {repr(output)[:80]}."
    )


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
    if prompt is not None and (not isinstance(prompt, str) or len(prompt) > MAX_TEXT_CHARS):
        shown = f"{len(prompt)} characters" if isinstance(prompt, str) else repr(prompt)[:80]
        raise LoopDefinitionError(f"agent_step(prompt=...) must be a str of at most {MAX_TEXT_CHARS}, got {shown}.")
    if isinstance(tools, str | bytes) or not isinstance(tools, Sequence) or len(tools) > _MAX_TOOLS:
        raise LoopDefinitionError(
            f"agent_step(tools=...) must be a list of at most {_MAX_TOOLS} tool names, got {repr(tools)[:80]}."
        )
    names = tuple(check_name(t, what="agent_step(tools=...) entry") for t in tools)
    model = _output(output)
    if (
        tool_choice is not None
        and not isinstance(tool_choice, RequireTool)
        and tool_choice not in ("auto", "any", "none")
    ):
        raise LoopDefinitionError(
            "agent_step(tool_choice=...) must be require_tool(name), 'auto', 'any' or 'none', "
            f"got {repr(tool_choice)[:80]}."
        )
    stored = dict(output) if isinstance(output, Mapping) else output
    return AgentStep(
        prompt, names, stored, tool_choice, _next(next, where="agent_step"), _label(label), output_model=model
    )


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
    check_name(tool, what="tool_step(tool)")
    if not isinstance(input, Mapping):
        raise LoopDefinitionError(
            f"tool_step({tool!r}, input=...) must be a mapping of arguments, got {repr(input)[:80]}."
        )
    check_bindings(input, where=f"tool_step({tool!r}).input", step_key=None)
    if save_as is not None:
        check_path(save_as, where=f"tool_step({tool!r}, save_as=...)")
    return ToolStep(tool, dict(input), save_as, _next(next, where=f"tool_step({tool!r})"), _label(label))


_AGENT_FIELDS = frozenset({"type", "prompt", "tools", "output", "tool_choice", "next", "label"})
_TOOL_FIELDS = frozenset({"type", "tool", "input", "save_as", "next", "label"})


def step_from_json(key: str, data: object) -> Step:
    """Rebuild a step from its JSON form; every field is type-checked (`LoopDefinitionError` naming the step)."""
    where = f"Step {key!r}"
    kind = data.get("type") if isinstance(data, Mapping) else None
    try:
        if kind == "agent":
            fields = fields_of(data, where=where, allowed=_AGENT_FIELDS, step_key=key)
            choice = fields.get("tool_choice")
            if isinstance(choice, Mapping):
                choice_fields = fields_of(
                    choice, where=f"{where} tool_choice", allowed=frozenset({"type", "name"}), step_key=key
                )
                if choice_fields.get("type") != "tool":
                    raise LoopDefinitionError(f"{where}: tool_choice must be {{'type': 'tool', 'name': ...}}.")
                choice = require_tool(choice_fields.get("name"))  # type: ignore[arg-type]
            tools = fields.get("tools")
            if tools is not None and not isinstance(tools, list):
                raise LoopDefinitionError(f"{where}: tools must be a list of names, got {repr(tools)[:80]}.")
            return agent_step(
                prompt=fields.get("prompt"),
                tools=tools or (),
                output=fields.get("output"),
                tool_choice=choice,
                next=next_from_json(fields.get("next"), where=where),
                label=fields.get("label"),
            )
        if kind == "tool":
            fields = fields_of(data, where=where, allowed=_TOOL_FIELDS, step_key=key)
            return tool_step(
                fields.get("tool"),  # type: ignore[arg-type]
                input=fields["input"] if fields.get("input") is not None else {},
                save_as=fields.get("save_as"),
                next=next_from_json(fields.get("next"), where=where),
                label=fields.get("label"),
            )
    except LoopDefinitionError as error:
        if error.step_key is None:
            error.step_key = key
        raise
    raise LoopDefinitionError(
        f"{where}: {repr(data)[:80]} is not a step; expected an object with 'type': 'agent' or 'tool'.", step_key=key
    )
