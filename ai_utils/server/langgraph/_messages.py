"""Messages between LangGraph clients and a session: state values as JSON, new input, resume values (pure).

- Out: a thread's state values as the LangGraph Server sends them (messages as their ``model_dump()``); a
  human message keeps the id its client sent (the session stores it under the turn id, and remembers the
  client's id as the prompt's ``message_id``), so a `RemoteGraph` node merges the reply into its own state
  without a second copy of the question.
- In: the run's new input is the last message of ``input["messages"]`` (a human message); the session owns the
  history, so earlier messages in the input are not stored again.
- Resume: ``command={"resume": value}`` becomes the decision mapper's ``decision`` / ``decisions``.

Every refusal is a 400 `RequestError` naming the field, never echoing the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from pydantic import BaseModel

from ai_utils.client import Decision
from ai_utils.server._request import refuse

__all__ = [
    "ai_chunk",
    "ai_message",
    "human_message",
    "message_dict",
    "new_input",
    "resume_decisions",
    "tool_message",
    "values_dict",
]

_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_HUMAN_TYPES = frozenset({"human", "user", "HumanMessage", "HumanMessageChunk"})
_INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")

# The shapes `model_dump()` gives in the installed langchain-core, built once: a token then costs a dict copy,
# not a pydantic model (tests/server/langgraph check they stay equal to model_dump()).
_AI = AIMessage(content="", id="_").model_dump()
_AI_CHUNK = AIMessageChunk(content="", id="_").model_dump()
_TOOL = ToolMessage(content="", tool_call_id="_", id="_").model_dump()
_HUMAN = HumanMessage(content="", id="_").model_dump()


def human_message(text: Any, message_id: str) -> dict[str, Any]:
    """A human message dict."""
    return {**_HUMAN, "content": text, "id": message_id}


def ai_message(text: str, message_id: str, tool_calls: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A complete AI message dict (``tool_calls`` as ``{"name", "args", "id", "type": "tool_call"}``)."""
    return {**_AI, "content": text, "id": message_id, "tool_calls": list(tool_calls), "invalid_tool_calls": []}


def ai_chunk(text: str, message_id: str, tool_call_chunks: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """An ``AIMessageChunk`` dict: one token (or the tool calls) of a streaming AI message."""
    return {
        **_AI_CHUNK,
        "content": text,
        "id": message_id,
        "tool_calls": [],
        "invalid_tool_calls": [],
        "tool_call_chunks": list(tool_call_chunks),
    }


def tool_message(output: str, call_id: str, name: str, status: str, message_id: str) -> dict[str, Any]:
    """A tool message dict (the result of one tool call)."""
    return {**_TOOL, "content": output, "name": name, "id": message_id, "tool_call_id": call_id, "status": status}


def message_dict(message: BaseMessage, human_ids: Mapping[str, str]) -> dict[str, Any]:
    """``message.model_dump()``; a human message stored under a turn id shows its client's message id."""
    data = message.model_dump()
    if isinstance(message, HumanMessage) and message.id is not None and message.id in human_ids:
        data["id"] = human_ids[message.id]
    return data


def _json_safe(value: Any, human_ids: Mapping[str, str]) -> Any:
    if isinstance(value, BaseMessage):
        return message_dict(value, human_ids)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v, human_ids) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v, human_ids) for v in value]
    return value  # anything else is written by the JSON encoder (its fallback: the value's text)


def values_dict(values: Any, human_ids: Mapping[str, str]) -> dict[str, Any]:
    """A state's values as JSON data: messages as their dicts, models as ``model_dump(mode="json")``."""
    if not isinstance(values, Mapping):
        return {}
    return {str(k): _json_safe(v, human_ids) for k, v in values.items()}


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            else:
                refuse(400, f"`{where}` may only hold text blocks ({{'type': 'text', 'text': ...}}); send text.")
        return "".join(texts)
    refuse(400, f"`{where}` must be a string or a list of text blocks.")


def new_input(value: Any) -> tuple[str, str | None]:
    """``(text, client message id)`` of a run's ``input``: its last message, which must be a human message.

    Takes ``{"messages": [...]}`` (dicts with ``role``/``type`` and ``content``, ``[role, content]`` pairs or
    strings, as LangGraph's ``add_messages`` does); the id is kept only when it is a valid message id.
    """
    if not isinstance(value, Mapping):
        refuse(400, '`input` must be an object like {"messages": [{"role": "user", "content": "Hi"}]}.')
    unknown = sorted(set(value) - {"messages"})
    if unknown:
        refuse(400, "`input` may only hold `messages`: the thread keeps the rest of its state itself.")
    messages = value.get("messages")
    if isinstance(messages, str | Mapping):
        messages = [messages]
    if not isinstance(messages, list) or not messages:
        refuse(400, "`input.messages` must be a non-empty list of messages, the last one the user's.")
    last = messages[-1]
    message_id: Any = None
    kind: Any
    content: Any
    if isinstance(last, str):
        kind, content = "human", last
    elif isinstance(last, list | tuple) and len(last) == 2:
        kind, content = last
    elif isinstance(last, Mapping):
        kind, content, message_id = last.get("role", last.get("type")), last.get("content"), last.get("id")
    else:
        refuse(400, "`input.messages[-1]` must be a message object (`role`/`type` and `content`).")
    if kind not in _HUMAN_TYPES:
        refuse(400, "The last message of `input.messages` must be the user's (`role`: 'user' or 'human').")
    text = _text(content, "input.messages[-1].content")
    if not text.strip():
        refuse(400, "The last message of `input.messages` has no text.")
    valid_id = message_id if isinstance(message_id, str) and _ID.fullmatch(message_id) else None
    return text, valid_id


def _decision(value: Any) -> Decision:
    """One HITL decision in LangChain's shape (``edited_action``) or ours, as the decision mapper takes it."""
    if isinstance(value, Mapping) and value.get("type") == "edit" and "args" not in value:
        action = value.get("edited_action")
        if not isinstance(action, Mapping) or not isinstance(action.get("args"), Mapping):
            refuse(400, 'An edit decision needs `edited_action: {"name", "args": {...}}` (or `args`).')
        return {"type": "edit", "args": dict(action["args"])}
    return value  # type: ignore[no-any-return]  # any other value: the mapper checks it against what waits


def _hitl(value: Any) -> list[Decision] | None:
    """The decisions of a LangChain HITL resume value ``{"decisions": [...]}``, else ``None``."""
    if isinstance(value, Mapping) and set(value) == {"decisions"}:
        decisions = value["decisions"]
        if not isinstance(decisions, list) or not decisions:
            refuse(400, "`command.resume.decisions` must be a non-empty list, one decision per action request.")
        return [_decision(d) for d in decisions]
    return None


def resume_decisions(resume: Any) -> tuple[Decision | None, dict[str, Decision] | list[Decision] | None]:
    """``(decision, decisions)`` for the decision mapper from ``command["resume"]``.

    - ``{"decisions": [...]}`` (LangChain's ``HumanInTheLoopMiddleware`` answer, ``edited_action`` edits too)
      -> ``decisions`` in request order;
    - ``{<interrupt id>: value, ...}`` (LangGraph's answer to several interrupts) -> ``decisions`` keyed by
      item id (a value with several HITL decisions answers ``"<id>:0"``, ``"<id>:1"``, ...);
    - anything else (``"approve"``, ``{"type": "reject", "message"}``, a plain interrupt's answer)
      -> ``decision``, which answers every pending item.
    """
    if resume is None:
        refuse(400, '`command.resume` is missing; answer the interrupt, e.g. {"decisions": [{"type": "approve"}]}.')
    listed = _hitl(resume)
    if listed is not None:
        return None, listed
    if isinstance(resume, Mapping) and resume and all(_INTERRUPT_ID.fullmatch(str(k)) for k in resume):
        keyed: dict[str, Decision] = {}
        for iid, value in resume.items():
            items = _hitl(value)
            if items is None:
                keyed[str(iid)] = _decision(value)
            elif len(items) == 1:
                keyed[str(iid)] = items[0]
            else:
                keyed.update({f"{iid}:{i}": item for i, item in enumerate(items)})
        return None, keyed
    return _decision(resume), None
