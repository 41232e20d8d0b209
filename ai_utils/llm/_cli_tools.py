"""A prompt-level tool protocol for the CLI chat models (their CLIs offer callers no function calling).

`bind_tools` keeps the tools as OpenAI tool dicts; each call then adds `tool_instructions` to the system prompt:
the tools' names, descriptions and JSON schemas, and the rule "to call a tool, reply with exactly one JSON object
``{"tool": <name>, "arguments": {...}}``; to answer, reply with plain text". `read_reply` turns the reply into a
tool call (checked against the tool's schema) or an answer; a bad call raises `ToolReplyError`, which the model
gets back once (`repair_prompt`) before the call fails with `ModelOutputError`.

The argument check covers the JSON Schema that tool schemas use (types, required, properties,
additionalProperties, enum, items, anyOf/oneOf, local ``$ref``s): the ``jsonschema`` package is not a dependency
of this library, and the tool node validates the arguments against the tool itself once more.
"""

from __future__ import annotations

import functools
import json
import operator
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage

from ai_utils.exceptions import ModelOutputError

__all__ = [
    "Repair",
    "ReplyGate",
    "ToolCallReply",
    "ToolReplyError",
    "as_chunk",
    "chosen_tool",
    "offered",
    "read_reply",
    "repair_prompt",
    "settle",
    "starts_a_call",
    "tool_instructions",
    "tool_reply",
]

_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


class ToolReplyError(ValueError):
    """The reply was meant as a tool call but is not a valid one (the text says why, for the repair prompt)."""


@dataclass(frozen=True, slots=True)
class ToolCallReply:
    """A valid tool call read from a reply."""

    name: str
    args: dict[str, Any]


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    return tool.get("function", tool)  # type: ignore[no-any-return]


def chosen_tool(tool_choice: Any) -> str | None:
    """``"required"`` (some tool), a tool name, ``"none"`` or ``None`` (``"auto"``) from LangChain's forms."""
    if isinstance(tool_choice, Mapping):
        name = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
        return str(name) if name else "required"
    if tool_choice in (None, "auto", False):
        return None
    if tool_choice in ("any", "required", True):
        return "required"
    return str(tool_choice)


def tool_instructions(tools: Sequence[Mapping[str, Any]], choice: str | None) -> str:
    """The system-prompt part that offers ``tools`` (OpenAI tool dicts) under the JSON reply protocol."""
    lines = []
    for tool in tools:
        function = _function(tool)
        schema = json.dumps(function.get("parameters") or {"type": "object"}, ensure_ascii=False, sort_keys=True)
        lines.append(f"- {function['name']}: {function.get('description') or ''}\n  parameters (JSON schema): {schema}")
    if choice == "required":
        rule = "You must call one of the tools now."
    elif choice is not None:
        rule = f"You must call the tool `{choice}` now."
    else:
        rule = "To answer the user instead, reply with plain text (not JSON)."
    return (
        "## Tools\n"
        "You can call these tools. To call one, reply with exactly one JSON object and nothing else (no prose, "
        'no code fences): {"tool": "<tool name>", "arguments": {<arguments matching its parameters schema>}}. '
        "You then get the tool's result and may call another tool or answer. "
        f"{rule}\nTools:\n" + "\n".join(lines)
    )


def starts_a_call(text: str) -> bool | None:
    """Whether a reply that begins with ``text`` is a tool call attempt (``None``: too early to tell)."""
    start = text.lstrip()
    if not start:
        return None
    return start[0] in "{`"


def read_reply(text: str, tools: Sequence[Mapping[str, Any]], choice: str | None) -> ToolCallReply | None:
    """The tool call a reply makes, or ``None`` for a plain answer.

    Raises:
        ToolReplyError: the reply is a tool call attempt that is not valid, or an answer where a call is required.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith("{"):
        if choice is not None:
            raise ToolReplyError("A tool call is required now, but the reply is plain text.")
        return None
    try:
        value = json.loads(body)
    except json.JSONDecodeError as error:
        raise ToolReplyError(f"The reply is not valid JSON ({error.msg} at position {error.pos}).") from None
    if not isinstance(value, dict) or not isinstance(value.get("tool", value.get("name")), str):
        if choice is not None:
            raise ToolReplyError('A tool call needs "tool" (the tool name) and "arguments" (an object).')
        return None  # a JSON answer
    name = str(value.get("tool", value.get("name")))
    args = value.get("arguments", value.get("args", {}))
    by_name = {str(_function(t)["name"]): _function(t) for t in tools}
    if name not in by_name:
        raise ToolReplyError(f"There is no tool {name!r}; the tools are {sorted(by_name)!r}.")
    if choice not in (None, "required", name):
        raise ToolReplyError(f"The tool `{choice}` must be called now, not {name!r}.")
    if not isinstance(args, dict):
        raise ToolReplyError(f'"arguments" must be a JSON object, got {json.dumps(args)[:200]}.')
    schema = by_name[name].get("parameters") or {}
    problems = schema_problems(args, schema, schema, "arguments")
    if problems:
        raise ToolReplyError(f"The arguments for {name!r} do not match its schema: " + "; ".join(problems[:5]) + ".")
    return ToolCallReply(name, args)


def repair_prompt(error: ToolReplyError) -> str:
    """What the model is told after a bad tool call reply (it gets one more try)."""
    return (
        f"Your last reply was not a valid tool call: {error} Reply again: either exactly one JSON object "
        '{"tool": "<tool name>", "arguments": {...}} that matches the tool\'s parameters schema, or plain text '
        "to answer."
    )


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        return target if isinstance(target, Mapping) else {}
    return schema


def _type_ok(value: Any, kind: Any) -> bool:
    kinds = kind if isinstance(kind, list) else [kind]
    for name in kinds:
        expected = _TYPES.get(str(name))
        if expected is None:
            return True  # a type this check does not know: the tool validates it
        if isinstance(value, expected) and not (name in ("integer", "number") and isinstance(value, bool)):
            return True
        if name == "integer" and isinstance(value, float) and value.is_integer():
            return True
    return False


def schema_problems(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], where: str) -> list[str]:
    """What makes ``value`` not match ``schema`` (empty when it matches), each naming its place."""
    schema = _resolve(schema, root)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            if not any(not schema_problems(value, option, root, where) for option in options):
                return [f"{where} matches none of the allowed forms"]
            return []
    problems: list[str] = []
    if "type" in schema and not _type_ok(value, schema["type"]):
        return [f"{where} must be {schema['type']}, got {json.dumps(value)[:80]}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where} must be one of {schema['enum']!r}")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        problems += [f"{where}.{key} is missing" for key in schema.get("required") or [] if key not in value]
        for key, item in value.items():
            if key in properties:
                problems += schema_problems(item, properties[key], root, f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}.{key} is not a known parameter")
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            problems += schema_problems(item, schema["items"], root, f"{where}[{index}]")
    return problems


def _text_of(chunk: AIMessageChunk) -> str:
    return chunk.content if isinstance(chunk.content, str) else chunk.text


class ReplyGate:
    """Streams a reply while tools are offered: a plain answer flows on, a tool call attempt is held whole.

    Reasoning chunks always pass. Once the first visible character shows a plain answer, every chunk passes;
    when it shows a tool call attempt (``{`` or a code fence), or a call is required, the text is held and
    `held` is the whole reply to read with `read_reply` when the stream ends.
    """

    __slots__ = ("_chunks", "_text", "decided")

    def __init__(self, choice: str | None) -> None:
        self.decided: bool | None = True if choice is not None else None  # True: held as a call attempt
        self._chunks: list[AIMessageChunk] = []
        self._text = ""

    def feed(self, chunk: AIMessageChunk) -> list[AIMessageChunk]:
        """The chunks to pass on now."""
        if self.decided is False or (not _text_of(chunk) and chunk.additional_kwargs):
            return [chunk]  # a plain answer, or reasoning
        self._chunks.append(chunk)
        if self.decided is None:
            self._text += _text_of(chunk)
            call = starts_a_call(self._text)
            if call is False:
                self.decided = False
                out, self._chunks = self._chunks, []
                return out
            self.decided = call
        return []

    def held(self) -> AIMessage | None:
        """The held reply (``None`` when it streamed on as a plain answer)."""
        if self.decided is False:
            return None
        merged = functools.reduce(operator.add, self._chunks, AIMessageChunk(content=""))
        return AIMessage(
            content=merged.content, response_metadata=merged.response_metadata, usage_metadata=merged.usage_metadata
        )


def offered(kwargs: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The call's bound tools (none when ``tool_choice="none"``) and the tool choice (see `chosen_tool`)."""
    choice = chosen_tool(kwargs.get("tool_choice"))
    tools = list(kwargs.get("tools") or [])
    return ([], None) if choice == "none" else (tools, choice)


def tool_reply(reply: AIMessage, tools: list[dict[str, Any]], choice: str | None) -> AIMessage:
    """``reply`` as a tool call when it makes one (else unchanged); `ToolReplyError` for a bad call."""
    call = read_reply(reply.text, tools, choice)
    if call is None:
        return reply
    return AIMessage(
        content="",
        tool_calls=[{"name": call.name, "args": call.args, "id": f"call_{uuid.uuid4().hex[:24]}", "type": "tool_call"}],
        response_metadata=reply.response_metadata,
        usage_metadata=reply.usage_metadata,
    )


@dataclass(frozen=True, slots=True)
class Repair:
    """A bad tool call reply: the messages of the one repair call, and how to read its reply."""

    messages: list[BaseMessage]
    error: ToolReplyError
    tools: list[dict[str, Any]]
    choice: str | None

    def done(self, reply: AIMessage) -> AIMessage:
        """The repair call's reply as a tool call or answer; `ModelOutputError` when it is still no valid call."""
        try:
            return tool_reply(reply, self.tools, self.choice)
        except ToolReplyError as error:
            raise ModelOutputError(
                f"The model sent no valid tool call, also after one repair: {error} (first reply: {self.error}) "
                "Use a stronger model or simpler tool schemas.",
                errors=str(error),
                attempts=2,
                output=reply.text,
            ) from None


def settle(messages: list[BaseMessage], reply: AIMessage, kwargs: dict[str, Any]) -> AIMessage | Repair:
    """The reply as the caller gets it (with its tool call, if any), or the `Repair` call to make first."""
    tools, choice = offered(kwargs)
    if not tools:
        return reply
    try:
        return tool_reply(reply, tools, choice)
    except ToolReplyError as error:
        repair = [*messages, AIMessage(reply.text), HumanMessage(repair_prompt(error))]
        return Repair(repair, error, tools, choice)


def as_chunk(message: AIMessage) -> AIMessageChunk:
    """A whole reply as one chunk (tool calls as their chunks, so the chunks sum to the reply)."""
    calls = [
        {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i, "type": "tool_call_chunk"}
        for i, c in enumerate(message.tool_calls)
    ]
    return AIMessageChunk(
        content=message.content,
        tool_call_chunks=calls,  # type: ignore[arg-type]
        response_metadata=message.response_metadata,
        usage_metadata=message.usage_metadata,
        chunk_position="last",
    )
