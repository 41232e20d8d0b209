"""Request bodies -> one `RunRequest`, per protocol: pure functions of the parsed JSON (no request, no agent).

- ``ndjson``: ``{"input"?, "thread_id"?, "decision"?, "decisions"?, "context"?}`` (a session prompt also
  ``"message_id"?``, ``"cursor"?``, ``"on_busy"?``; no ``thread_id``); ``input`` is a string or a list of
  content blocks. Unknown keys and wrong types are refused.
- ``ag-ui``: AG-UI's ``RunAgentInput`` (validated with ``ag_ui.core``): ``threadId`` is the thread (or session),
  the last message (a user message) is the input (the server owns the history; its ``image`` parts as content
  blocks), ``resume`` entries are the
  decisions (keyed by interrupt id; `ApprovalPayload` or a `Decision` as payload, ``cancelled`` = reject).
- ``vercel-ai``: the AI SDK's ``{id, messages, trigger?, messageId?}``: ``id`` is the thread (or session); the
  last message is a user message (the input; its image ``file`` parts as content blocks) or the assistant
  message whose tool parts answer approvals (``approval-responded``: ``approved: true`` approves, anything else
  rejects with the ``reason``).

Content blocks are only shaped here; `ai_utils.sessions._content` checks the images (base64, type by their bytes,
count and size) for both routes, and a part that is neither text nor an image (audio, a PDF) is refused, never
dropped.

Every refusal is a `RequestError` 400 whose message names the field, never the value the client sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from pydantic import ValidationError

from ai_utils.client import Decision
from ai_utils.server._request import refuse
from ai_utils.sessions._session import OnBusy

__all__ = ["OnBusy", "Protocol", "RunRequest", "check_id", "check_on_busy", "parse_body"]

Protocol = Literal["ndjson", "ag-ui", "vercel-ai"]

_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What one request asks for, whatever its protocol."""

    input: str | list[dict[str, Any]] | None = None  # a list: content blocks (text and images), checked by the route
    decision: Decision | None = None
    decisions: list[Decision] | dict[str, Decision] | None = None
    thread_id: str | None = None  # the thread (agent) or session the body names
    run_id: str | None = None  # AG-UI's runId
    message_id: str | None = None  # the prompt's idempotency key (sessions)
    cursor: int | None = None  # where a session prompt's stream starts
    context: Any = None
    has_context: bool = False
    continues: str | None = None  # the assistant message a Vercel approval answer continues
    known_tool_calls: tuple[str, ...] = field(default=())
    on_busy: OnBusy | None = None  # a session prompt's double-texting strategy (None: the routes' default)


def check_id(value: Any, what: str) -> str:
    """``value`` if it is an id (1-128 letters, digits, ``.``, ``_``, ``-``, nothing else), else a 400."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        refuse(400, f"`{what}` must be 1-128 letters, digits, '.', '_' or '-' (e.g. 'order-42').")
    return value


def check_on_busy(value: Any) -> OnBusy:
    """``value`` if it is a double-texting strategy, else a 400."""
    if value not in get_args(OnBusy):
        refuse(400, '`on_busy` must be "enqueue", "reject", "interrupt" or "rollback".')
    return cast(OnBusy, value)


def _content_blocks(value: Any) -> list[dict[str, Any]]:
    """A prompt's content blocks (objects with a string ``type``), else a 400.

    The route checks the rest (`ai_utils.sessions._content`: base64, image type and size) with a `UserError` (400).
    """
    if not value or not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in value):
        refuse(
            400,
            '`input` must be a string or a non-empty list of content blocks ({"type": "text", "text"}, {"type": '
            '"image", "data": <base64>, "mime_type"}, {"type": "image_url", "url": "data:image/...;base64,..."}).',
        )
    return cast("list[dict[str, Any]]", value)


def _is_decision(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, Mapping) and isinstance(value.get("type"), str))


def _ndjson(body: dict[str, Any], session: bool) -> RunRequest:
    known = (
        ("input", "message_id", "decision", "decisions", "cursor", "context", "on_busy")
        if session
        else (
            "input",
            "thread_id",
            "decision",
            "decisions",
            "context",
        )
    )
    unknown = sorted(set(body) - set(known))
    if unknown:
        refuse(400, f"Unknown field(s) in the body ({len(unknown)}); it takes only {', '.join(known)}.")
    text = body.get("input")
    if isinstance(text, list):
        text = _content_blocks(text)
    elif text is not None and not isinstance(text, str):
        refuse(400, "`input` must be a string (the user's message) or a list of content blocks.")
    on_busy = check_on_busy(body["on_busy"]) if body.get("on_busy") is not None else None
    decision = body.get("decision")
    if decision is not None and not _is_decision(decision):
        refuse(400, '`decision` must be "approve", "reject" or an object with a "type" (e.g. {"type": "edit", ...}).')
    decisions = body.get("decisions")
    if decisions is not None and not isinstance(decisions, list | dict):
        refuse(400, "`decisions` must be a list (one answer per pending item) or an object keyed by item id.")
    thread_id = body.get("thread_id")
    if thread_id is not None:
        check_id(thread_id, "thread_id")
    message_id = body.get("message_id")
    if message_id is not None:
        check_id(message_id, "message_id")
    cursor = body.get("cursor")
    if cursor is not None and (isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor < 2**63):
        refuse(400, "`cursor` must be a whole number >= 0 (the last cursor you read).")
    return RunRequest(
        input=text,
        decision=decision,
        decisions=decisions,
        thread_id=thread_id,
        message_id=message_id,
        cursor=cursor,
        context=body.get("context"),
        has_context="context" in body,
        on_busy=on_busy,
    )


def _text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(
        str(getattr(p, "text", None) or (p.get("text") if isinstance(p, Mapping) else "") or "") for p in parts
    )


def _resume_decision(entry: Any) -> Decision:
    from ai_utils.streaming._ag_ui import ApprovalPayload, approval_decision

    if entry.status == "cancelled":
        return "reject"
    payload = entry.payload
    if isinstance(payload, Mapping) and "approved" in payload:
        try:
            return approval_decision(ApprovalPayload.model_validate(payload))
        except ValidationError:
            refuse(
                400, '`resume[].payload` of a tool approval must be {"approved": true|false, "reason"?, "editedArgs"?}.'
            )
    if payload is None:
        refuse(400, '`resume[].payload` is missing; answer the interrupt (e.g. {"approved": true}).')
    return cast(Decision, payload)  # a Decision form, or the answer to a plain interrupt, passed on unchanged


def _ag_ui(body: dict[str, Any]) -> RunRequest:
    from ag_ui.core import RunAgentInput

    try:
        run = RunAgentInput.model_validate(body)
    except ValidationError as error:
        where = sorted({".".join(str(p) for p in e["loc"]) or "body" for e in error.errors(include_input=False)})
        refuse(400, f"The body is not an AG-UI RunAgentInput; check {', '.join(where[:5])}.")
    thread_id = check_id(run.thread_id, "threadId")
    run_id = run.run_id if isinstance(run.run_id, str) and _ID.fullmatch(run.run_id) else None
    if run.resume:
        decisions: dict[str, Decision] = {}
        for entry in run.resume:
            decisions[check_id(entry.interrupt_id, "resume[].interruptId")] = _resume_decision(entry)
        return RunRequest(decisions=decisions, thread_id=thread_id, run_id=run_id, message_id=run_id)
    last = run.messages[-1] if run.messages else None
    if last is None or getattr(last, "role", None) != "user":
        refuse(400, "Nothing to run: the last message must be the user's (or send `resume` for a waiting approval).")
    content = getattr(last, "content", "")
    text = _text_of(content)
    images = _ag_ui_images(content)
    if not text.strip() and not images:
        refuse(400, "The last user message has no text.")
    mid = getattr(last, "id", None)
    message_id = mid if isinstance(mid, str) and _ID.fullmatch(mid) else run_id
    return RunRequest(input=_with_images(text, images), thread_id=thread_id, run_id=run_id, message_id=message_id)


def _with_images(text: str, images: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """The prompt: the text alone, or (with images) content blocks, text first, as `Session.prompt` takes them."""
    if not images:
        return text
    return [*([{"type": "text", "text": text}] if text.strip() else []), *images]


def _ag_ui_images(content: Any) -> list[dict[str, Any]]:
    """A prompt's images from AG-UI input parts (``image`` with a ``data`` or ``url`` source); other media a 400."""
    images: list[dict[str, Any]] = []
    for i, part in enumerate(content if isinstance(content, list) else []):
        kind = getattr(part, "type", None)
        if kind == "text":
            continue
        source = getattr(part, "source", None) if kind == "image" else None
        if source is None:
            refuse(400, f"`messages[-1].content[{i}]` is {kind!r}; send text and images (PNG, JPEG, GIF or WebP).")
        if source.type == "data":
            images.append({"type": "image", "data": source.value, "mime_type": source.mime_type})
        else:  # a URL: data URLs only (the prompt is stored with its images); the check says so with the fix
            images.append({"type": "image_url", "url": source.value})
    return images


def _vercel_images(parts: list[Any]) -> list[dict[str, Any]]:
    """A prompt's images from AI SDK ``file`` parts whose media type is an image (their ``url``); other files a 400."""
    images: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        if not isinstance(part, Mapping) or part.get("type") != "file":
            continue
        if not str(part.get("mediaType", "")).startswith("image/"):
            refuse(
                400, f"`messages[-1].parts[{i}]` is a file but no image; send text and images (PNG, JPEG, GIF, WebP)."
            )
        images.append({"type": "image_url", "url": part.get("url")})
    return images


def _approvals(message: Mapping[str, Any]) -> tuple[dict[str, Decision], tuple[str, ...]]:
    decisions: dict[str, Decision] = {}
    calls: list[str] = []
    for part in message.get("parts") or []:
        if not isinstance(part, Mapping) or not isinstance(part.get("toolCallId"), str):
            continue
        calls.append(part["toolCallId"])
        approval = part.get("approval")
        if part.get("state") != "approval-responded" or not isinstance(approval, Mapping):
            continue
        approval_id = check_id(approval.get("id"), "approval.id")
        if approval.get("approved") is True:  # deny by default: only a JSON true approves
            decisions[approval_id] = "approve"
        else:
            reason = approval.get("reason")
            decisions[approval_id] = {"type": "reject", "message": reason} if isinstance(reason, str) else "reject"
    return decisions, tuple(calls)


def _vercel(body: dict[str, Any]) -> RunRequest:
    chat_id = check_id(body.get("id"), "id")
    if body.get("trigger", "submit-message") != "submit-message":
        refuse(400, 'Only `trigger: "submit-message"` is supported; send the new message instead of regenerating.')
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], Mapping):
        refuse(400, "`messages` must be the chat's UI messages, ending with the new one.")
    last = messages[-1]
    parts = last.get("parts")
    if not isinstance(parts, list):
        refuse(400, "`messages[-1].parts` must be a list of message parts.")
    mid = last.get("id")
    message_id = mid if isinstance(mid, str) and _ID.fullmatch(mid) else None
    if last.get("role") == "assistant":
        decisions, calls = _approvals(last)
        if not decisions:
            refuse(400, "The last message is the assistant's and answers no approval; send a user message.")
        return RunRequest(decisions=decisions, thread_id=chat_id, continues=message_id, known_tool_calls=calls)
    if last.get("role") != "user":
        refuse(400, "The last message must be the user's (or the assistant's with approval answers).")
    text = "".join(str(p.get("text") or "") for p in parts if isinstance(p, Mapping) and p.get("type") == "text")
    images = _vercel_images(parts)
    if not text.strip() and not images:
        refuse(400, "The last user message has no text part.")
    return RunRequest(input=_with_images(text, images), thread_id=chat_id, message_id=message_id)


def parse_body(protocol: Protocol, body: dict[str, Any], *, session: bool = False) -> RunRequest:
    """The `RunRequest` of a parsed JSON object in ``protocol``'s form (a 400 `RequestError` if it is not one)."""
    if protocol == "ndjson":
        return _ndjson(body, session)
    if protocol == "ag-ui":
        return _ag_ui(body)
    return _vercel(body)
