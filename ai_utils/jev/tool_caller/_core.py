"""Pure helpers of `JevToolCaller`: questions, candidate checks and mapping, the gate, history entries.

Nothing here does I/O; the graph nodes (`_graph`) call these between their sync/async shells.

Candidates never enter a checkpoint as objects. State keeps, per parameter, the picked *index* and the
picked candidate's JSON rendering (`to_json`); the objects live only in the run. A run resumed later (even
in a new process) calls the tool's ``params`` again and takes the object at the stored index, after
checking that it still renders exactly as the value that was proposed (else the one candidate that does).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ai_utils.exceptions import UserError
from ai_utils.jev._validation import safe_label_keys
from ai_utils.jev.questions import ClassifyResult
from ai_utils.jev.tool_caller._types import (
    ConfidenceGate,
    JevNoParamOptionsError,
    JevParamsError,
    JevProposalChangedError,
    ParamsProvider,
    to_json,
)
from ai_utils.tools._mcp_config import MCPServer

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ToolEntry",
    "add_usage",
    "assistant_entry",
    "call_kwargs",
    "check_candidates",
    "check_request",
    "check_static_shape",
    "gate_below",
    "jev_state",
    "match_value",
    "param_questions",
    "pick_index",
    "recover_index",
    "selection",
    "system_prompt",
    "tool_question",
    "user_entry",
]

DEFAULT_SYSTEM_PROMPT = (
    "Pick exactly one tool that carries out the newest user entry in `message_history`; earlier entries are "
    "context (previous requests and tool results). Where the tool has parameters, pick for each the candidate "
    "value the request refers to. Never invent values."
)
TOOL_QUESTION = "tool"
_STRING_LABEL_MAX = 200
_RESERVED = frozenset({"context", "thread_id", "decision", "debug", "timeout", "signal"})


@dataclass(frozen=True)
class ToolEntry:
    """A tool as one run sees it: local (`JevTool`) or loaded from an MCP server (then ``server`` is set)."""

    name: str
    description: str
    func: Callable[..., Any]
    params: ParamsProvider | None
    server: MCPServer | None = None


def system_prompt(prompt: str | None) -> str:
    """The ``system_prompt`` Jev sees: the built-in default, after the caller's prompt when there is one."""
    return DEFAULT_SYSTEM_PROMPT if not prompt else f"{prompt.strip()}\n\n{DEFAULT_SYSTEM_PROMPT}"


def _accepted(fn: Callable[..., Any]) -> frozenset[str] | None:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters if p.kind is not inspect.Parameter.POSITIONAL_ONLY)


def call_kwargs(fn: Callable[..., Any], available: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments ``fn`` declares (all of them when it takes ``**kwargs``)."""
    accepted = _accepted(fn)
    if accepted is None:
        return dict(available)
    return {key: value for key, value in available.items() if key in accepted}


def check_candidates(tool: str, raw: Any) -> dict[str, list[Any]]:
    """Validate what a tool's ``params`` gave: a mapping of non-empty names to non-empty lists.

    Raises:
        JevParamsError: (a `TypeError`) not a mapping, or a value that is not a list.
        JevNoParamOptionsError: a parameter with an empty list.
    """
    if not isinstance(raw, Mapping):
        raise JevParamsError(
            f"Tool {tool!r}: `params` must be (or return) a mapping of parameter name -> list of candidates, "
            f"got {type(raw).__name__}. Return e.g. {{'permission': ['read', 'write']}}."
        )
    out: dict[str, list[Any]] = {}
    for name, values in raw.items():
        if not isinstance(name, str) or not name:
            raise JevParamsError(f"Tool {tool!r}: parameter names must be non-empty strings, got {name!r}.")
        if not isinstance(values, list | tuple):
            raise JevParamsError(
                f"Tool {tool!r}: the candidates of parameter {name!r} must be a list, got {type(values).__name__}. "
                f"Wrap a single value: {{{name!r}: [value]}}."
            )
        if not values:
            raise JevNoParamOptionsError(tool, name)
        out[name] = list(values)
    return out


def check_static_shape(tool: str, params: Any) -> None:
    """Check static ``params`` at construction: a mapping of lists (empty lists fail only when picked).

    Raises:
        JevParamsError: not a mapping, or a value that is not a list.
    """
    if not isinstance(params, Mapping):
        check_candidates(tool, params)
    for name, values in params.items():
        check_candidates(tool, {name: values} if not isinstance(values, list | tuple) or values else {})


def jev_state(prompt: str, history: Sequence[Mapping[str, Any]], request: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{system_prompt, message_history}`` with the current request as the newest user entry."""
    entries = [dict(entry) for entry in history]
    if request is not None:
        entries.append(user_entry(request))
    return {"system_prompt": prompt, "message_history": entries}


def user_entry(request: Mapping[str, Any]) -> dict[str, Any]:
    """The history entry of one request."""
    return {"role": "user", "content": dict(request)}


def assistant_entry(
    tool: str, arguments: Mapping[str, Any], value: Any = None, *, rejected: bool = False
) -> dict[str, Any]:
    """The history entry of one tool run (or of a rejected proposal)."""
    content: dict[str, Any] = {"tool": tool, "params": dict(arguments)}
    if rejected:
        content["rejected"] = True
    else:
        content["result"] = to_json(value)
    return {"role": "assistant", "content": content}


def tool_question(tools: Sequence[ToolEntry]) -> dict[str, Any]:
    """Jev call 1: one choice over the tool names, described by their descriptions."""
    return {
        TOOL_QUESTION: {
            "type": "choice",
            "instructions": (
                "Which tool carries out the newest user entry in `message_history`? Follow `system_prompt`."
            ),
            "criteria": {tool.name: tool.description for tool in tools},
        }
    }


def _labels(candidates: Sequence[Any]) -> tuple[list[str], list[Any]]:
    """Choice labels and criteria: distinct short strings are their own labels, else ``c0, c1, ...``."""
    strings = all(isinstance(c, str) and 0 < len(c) <= _STRING_LABEL_MAX for c in candidates)
    if strings and len(set(candidates)) == len(candidates):
        return list(candidates), [None] * len(candidates)
    return [f"c{index}" for index in range(len(candidates))], [to_json(c) for c in candidates]


def param_questions(
    tool: ToolEntry, names: Sequence[str], candidates: Mapping[str, Sequence[Any]]
) -> tuple[dict[str, Any], dict[str, str], dict[str, list[str]]]:
    """Jev call 2: one choice per ambiguous parameter, all in one request.

    Returns:
        ``(questions, question id -> parameter, parameter -> label of each candidate index)``.
    """
    ids = safe_label_keys(list(names)) or {name: name for name in names}
    questions: dict[str, Any] = {}
    labels: dict[str, list[str]] = {}
    for qid, name in ids.items():
        keys, criteria = _labels(candidates[name])
        labels[name] = keys
        questions[qid] = {
            "type": "choice",
            "instructions": (
                f"The tool `{tool.name}` ({tool.description}) runs with the parameter `{name}`. Which value of "
                f"`{name}` does the newest user entry in `message_history` ask for?"
            ),
            "criteria": dict(zip(keys, criteria, strict=True)),
        }
    return questions, ids, labels


def pick_index(labels: Sequence[str], label: str) -> int:
    """The candidate index of the label Jev chose."""
    return list(labels).index(label)


def selection(
    candidates: Sequence[Any], index: int, confidence: float, *, deterministic: bool = False
) -> dict[str, Any]:
    """What state keeps of one picked parameter: the index and the JSON of the value, never the object."""
    return {
        "index": index,
        "value": to_json(candidates[index]),
        "confidence": float(confidence),
        "candidates": len(candidates),
        "deterministic": deterministic,
    }


def _same_json(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def recover_index(tool: str, name: str, candidates: Sequence[Any], stored: Mapping[str, Any]) -> int:
    """The index of the proposed candidate among freshly resolved ``candidates`` (after a resume).

    Raises:
        JevProposalChangedError: no candidate (or more than one) renders as the proposed value any more.
    """
    index = int(stored["index"])
    if index < len(candidates) and _same_json(to_json(candidates[index]), stored["value"]):
        return index
    matches = [i for i, c in enumerate(candidates) if _same_json(to_json(c), stored["value"])]
    if len(matches) == 1:
        return matches[0]
    raise JevProposalChangedError(
        f"Tool {tool!r}: the proposed value of parameter {name!r} is no longer among the candidates its `params` "
        "return now, so nothing ran. Send the request again to get a new proposal."
    )


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def match_value(tool: str, name: str, candidates: Sequence[Any], value: Any) -> int:
    """The index of ``value`` among ``candidates``: the same object, an equal one, or its JSON rendering.

    Raises:
        JevParamsError: ``value`` is not among the candidates.
    """
    for index, candidate in enumerate(candidates):
        if candidate is value:
            return index
    for index, candidate in enumerate(candidates):
        if _equal(candidate, value):
            return index
    rendered = to_json(value)
    for index, candidate in enumerate(candidates):
        if _same_json(to_json(candidate), rendered):
            return index
    shown = [to_json(c) for c in candidates[:10]]
    raise JevParamsError(
        f"call_tool: {value!r} is not a candidate of parameter {name!r} of tool {tool!r}. "
        f"Pass one of the values its `params` return, e.g. {shown!r}."
    )


def gate_below(
    gate: ConfidenceGate, tool: str, tool_confidence: float, params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Every confidence below the tool's threshold: ``[{scope, confidence, required}]``."""
    required = gate.threshold(tool)
    below = []
    if tool_confidence < required:
        below.append({"scope": "tool", "confidence": tool_confidence, "required": required})
    for name, picked in params.items():
        if picked["confidence"] < required:
            below.append({"scope": f"params.{name}", "confidence": picked["confidence"], "required": required})
    return below


def add_usage(usage: Mapping[str, Any] | None, result: ClassifyResult[Any]) -> dict[str, Any]:
    """``usage`` plus one Jev call's tokens and cost."""
    total = dict(usage or {"input_tokens": 0, "output_tokens": 0, "cost": None, "calls": 0})
    total["input_tokens"] += result.usage.input_tokens
    total["output_tokens"] += result.usage.output_tokens
    if result.usage.cost is not None:
        total["cost"] = (total["cost"] or 0.0) + result.usage.cost
    total["calls"] += 1
    return total


def check_request(request: Any) -> dict[str, Any]:
    """The request fields as a JSON-serialisable dict.

    Raises:
        UserError: not a mapping, empty, or not JSON-serialisable.
    """
    if not isinstance(request, Mapping):
        raise UserError(
            f"The request must be a mapping of JSON fields, got {type(request).__name__}. "
            "Pass e.g. `invoke({'question': '...'})`."
        )
    if not request:
        raise UserError("The request is empty. Pass at least one field, e.g. `invoke({'question': '...'})`.")
    reserved = sorted(set(map(str, request)) & _RESERVED)
    if reserved:
        # The seed's request object carries these next to the request fields; here they are keywords, so a
        # `context` key (secrets!) must never be mistaken for a request field and sent to Jev.
        raise UserError(
            f"The request has the field(s) {reserved!r}, which are call options, not request fields. "
            f"Pass them as keyword arguments, e.g. `invoke({{...}}, {reserved[0]}=...)`."
        )
    try:
        json.dumps(request)
    except (TypeError, ValueError) as error:
        raise UserError(
            f"The request fields {sorted(map(str, request))!r} must be JSON-serialisable ({error}). "
            "Pass local objects through `context` instead."
        ) from None
    return {str(key): value for key, value in request.items()}
