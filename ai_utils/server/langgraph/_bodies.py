"""LangGraph API request bodies -> what a route needs (pure functions of the parsed JSON; 400 on anything else).

The keys are the ones ``langgraph-sdk`` (Python and JS) sends. A key that asks for a LangGraph Server feature
these routes do not have (``webhook``, ``interrupt_before``, ``checkpoint`` time travel to an earlier checkpoint,
``after_seconds``, a ``command`` with ``goto``/``update``...) is refused with a 400 naming it, never silently
dropped. ``config``,
``durability``, ``stream_resumable``, ``feedback_keys``-free tracing keys are accepted and do not change the
run: a thread's runs always use its session's config, are stored before they are acknowledged and can
always be rejoined.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ai_utils.client import Decision
from ai_utils.server._bodies import check_id
from ai_utils.server._request import refuse
from ai_utils.server.langgraph._messages import new_input, resume_decisions
from ai_utils.server.langgraph._parts import STREAM_MODES

__all__ = [
    "MultitaskStrategy",
    "RunBody",
    "ThreadBody",
    "parse_checkpoint",
    "parse_history",
    "parse_limit",
    "parse_run",
    "parse_search",
    "parse_stream_modes",
    "parse_thread",
]

MultitaskStrategy = Literal["reject", "interrupt", "rollback", "enqueue"]

_RUN_KEYS = frozenset(
    {
        "assistant_id",
        "input",
        "command",
        "stream_mode",
        "stream_subgraphs",
        "stream_resumable",
        "config",
        "context",
        "metadata",
        "interrupt_before",
        "interrupt_after",
        "feedback_keys",
        "webhook",
        "checkpoint",
        "checkpoint_id",
        "checkpoint_during",
        "multitask_strategy",
        "if_not_exists",
        "on_disconnect",
        "on_completion",
        "after_seconds",
        "durability",
        "strict_resume",
        "langsmith_tracer",
    }
)
# Keys naming a LangGraph Server feature these routes do not have: refused when set, never dropped.
_UNSUPPORTED = {
    "interrupt_before": "breakpoints (`interrupt_before`): use a tool approval (`interrupt_on`) instead",
    "interrupt_after": "breakpoints (`interrupt_after`): use a tool approval (`interrupt_on`) instead",
    "feedback_keys": "`feedback_keys`",
    "webhook": "webhooks (`webhook`): poll `GET /threads/{id}/runs/{run_id}` or `join` instead",
    "after_seconds": "scheduled runs (`after_seconds`)",
}


def _bool(body: Mapping[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        refuse(400, f"`{key}` must be true or false.")
    return value


def _choice(body: Mapping[str, Any], key: str, options: Sequence[str], default: str | None) -> str | None:
    value = body.get(key, default)
    if value is not None and value not in options:
        refuse(400, f"`{key}` must be one of {', '.join(map(repr, options))}.")
    return None if value is None else str(value)


def _object(body: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        refuse(400, f"`{key}` must be a JSON object.")
    return dict(value)


def parse_stream_modes(value: Any) -> tuple[str, ...]:
    """The stream modes of a body or query value (a mode, a list of modes, or a JSON list as text)."""
    if isinstance(value, str) and value.startswith("["):
        try:
            value = json.loads(value)
        except ValueError:
            refuse(400, "`stream_mode` must be a stream mode or a list of them.")
    modes = [value] if isinstance(value, str) else value
    if not isinstance(modes, list | tuple) or not modes or not all(isinstance(m, str) for m in modes):
        refuse(400, "`stream_mode` must be a stream mode or a list of them.")
    unknown = sorted(set(modes) - set(STREAM_MODES))
    if unknown:
        refuse(
            400,
            f"Stream mode(s) {', '.join(map(repr, unknown))} are not served here; use "
            f"{', '.join(map(repr, STREAM_MODES))} (RemoteGraph's 'messages' arrives as 'messages-tuple').",
        )
    return tuple(dict.fromkeys(modes))


def parse_checkpoint(value: Any, thread_id: str) -> str | None:
    """The checkpoint id a checkpoint object names (``None``: the thread's head); it must be one of ``thread_id``'s.

    ``RemoteGraph`` sends ``{"thread_id": ...}`` alone for "the thread as it stands"; a subgraph's checkpoint
    (``checkpoint_ns``) is a 400.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) - {"checkpoint_id", "checkpoint_ns", "checkpoint_map", "thread_id"}:
        refuse(400, "`checkpoint` must be a checkpoint object ({thread_id, checkpoint_ns, checkpoint_id}).")
    if value.get("thread_id") not in (None, thread_id):
        refuse(400, "`checkpoint.thread_id` names another thread; send this thread's checkpoint.")
    if value.get("checkpoint_ns") not in (None, "") or value.get("checkpoint_map"):
        refuse(400, "This server does not serve a subgraph's checkpoints (`checkpoint_ns`).")
    given = value.get("checkpoint_id")
    return None if given is None else check_id(given, "checkpoint_id")


def _checkpoint_id(body: Mapping[str, Any]) -> str | None:
    """The checkpoint a run names (``checkpoint`` or ``checkpoint_id``); `start_run` allows only the thread's head.

    ``useStream`` with ``fetchStateHistory`` sends the thread's head checkpoint with every run: continuing from it
    is what a run does anyway. Any other checkpoint is time travel (refused there, never ignored).
    """
    checkpoint = body.get("checkpoint")
    given = body.get("checkpoint_id")
    if checkpoint is not None:
        if not isinstance(checkpoint, Mapping) or set(checkpoint) - {
            "checkpoint_id",
            "checkpoint_ns",
            "checkpoint_map",
            "thread_id",
        }:
            refuse(400, "`checkpoint` must be a checkpoint object ({checkpoint_id, checkpoint_ns, checkpoint_map}).")
        if checkpoint.get("checkpoint_ns") not in (None, "") or checkpoint.get("checkpoint_map"):
            refuse(400, "This server does not support runs from a subgraph's checkpoint (`checkpoint_ns`).")
        inner = checkpoint.get("checkpoint_id")
        if given is not None and inner is not None and inner != given:
            refuse(400, "`checkpoint_id` and `checkpoint.checkpoint_id` name different checkpoints; send one.")
        given = given if given is not None else inner
    return None if given is None else check_id(given, "checkpoint_id")


@dataclass(frozen=True, slots=True)
class RunBody:
    """A run request: the assistant, the new input or the resume answer, and how to run and stream it."""

    assistant_id: str
    text: str | None = None
    message_id: str | None = None
    decision: Decision | None = None
    decisions: list[Decision] | dict[str, Decision] | None = None
    stream_modes: tuple[str, ...] = ("values",)
    subgraphs: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    context: Any = None
    has_context: bool = False
    multitask_strategy: MultitaskStrategy = "reject"
    create_thread: bool = False
    cancel_on_disconnect: bool = False
    checkpoint_id: str | None = None

    @property
    def resuming(self) -> bool:
        """Whether the run answers an interrupt (``command={"resume": ...}``)."""
        return self.text is None


def parse_run(body: Mapping[str, Any]) -> RunBody:
    """The `RunBody` of ``POST /threads/{id}/runs[/stream|/wait]`` (and the thread-less ``/runs/...``)."""
    unknown = sorted(set(body) - _RUN_KEYS)
    if unknown:
        refuse(400, f"Unknown field(s) in the body ({len(unknown)}); a run takes {', '.join(sorted(_RUN_KEYS))}.")
    for key, feature in _UNSUPPORTED.items():
        if body.get(key) not in (None, [], 0, False):
            refuse(400, f"This server does not support {feature}.")
    assistant_id = check_id(body.get("assistant_id"), "assistant_id")
    command = body.get("command")
    has_input = body.get("input") is not None
    if has_input == (command is not None):
        refuse(400, 'Send either `input` (a new message) or `command` ({"resume": ...} for a waiting interrupt).')
    text = message_id = None
    decision: Decision | None = None
    decisions: list[Decision] | dict[str, Decision] | None = None
    if has_input:
        text, message_id = new_input(body["input"])
    else:
        # RemoteGraph sends the whole `Command` (`asdict`): its unset `graph`/`update`/`goto` are empty, not asks.
        if not isinstance(command, Mapping) or any(
            key != "resume" and value not in (None, [], {}, "") for key, value in command.items()
        ):
            refuse(400, '`command` supports only `resume` here ({"resume": ...}); `goto` and `update` are not served.')
        if not set(command) <= {"resume", "goto", "update", "graph"}:
            refuse(400, "`command` takes `resume` (and empty `goto`, `update`, `graph`).")
        decision, decisions = resume_decisions(command.get("resume"))
    modes = parse_stream_modes(body["stream_mode"]) if body.get("stream_mode") is not None else ("values",)
    on_disconnect = _choice(body, "on_disconnect", ("cancel", "continue"), "continue")
    _choice(body, "on_completion", ("delete", "keep"), None)
    _choice(body, "durability", ("sync", "async", "exit"), None)
    strategy = _choice(body, "multitask_strategy", get_args(MultitaskStrategy), "reject")
    if_not_exists = _choice(body, "if_not_exists", ("create", "reject"), "reject")
    for key in ("stream_resumable", "checkpoint_during", "strict_resume"):
        if body.get(key) is not None:
            _bool(body, key)
    _object(body, "config")
    return RunBody(
        assistant_id=assistant_id,
        text=text,
        message_id=message_id,
        decision=decision,
        decisions=decisions,
        stream_modes=modes,
        subgraphs=_bool(body, "stream_subgraphs"),
        metadata=_object(body, "metadata"),
        context=body.get("context"),
        has_context=body.get("context") is not None,
        multitask_strategy=strategy,  # type: ignore[arg-type]
        create_thread=if_not_exists == "create",
        cancel_on_disconnect=on_disconnect == "cancel",
        checkpoint_id=_checkpoint_id(body),
    )


@dataclass(frozen=True, slots=True)
class ThreadBody:
    """``POST /threads``: an id (or a new one), metadata, and what to do when the id exists."""

    thread_id: str | None
    metadata: dict[str, Any]
    if_exists: Literal["raise", "do_nothing"]


def parse_thread(body: Mapping[str, Any]) -> ThreadBody:
    """The `ThreadBody` of ``POST /threads``."""
    unknown = sorted(set(body) - {"thread_id", "metadata", "if_exists", "supersteps", "ttl", "graph_id"})
    if unknown:
        refuse(400, "Unknown field(s) in the body; a thread takes thread_id, metadata and if_exists.")
    if body.get("supersteps"):
        refuse(400, "This server does not support creating a thread with `supersteps`; run it instead.")
    if body.get("ttl") is not None:
        refuse(400, "This server does not support thread `ttl`: a thread is a durable session and stays.")
    thread_id = body.get("thread_id")
    if thread_id is not None:
        check_id(thread_id, "thread_id")
    metadata = _object(body, "metadata")
    if body.get("graph_id") is not None:
        metadata["graph_id"] = check_id(body["graph_id"], "graph_id")
    if_exists = _choice(body, "if_exists", ("raise", "do_nothing"), "raise")
    return ThreadBody(thread_id, metadata, if_exists)  # type: ignore[arg-type]


def parse_limit(value: Any, default: int, what: str = "limit", most: int = 1000) -> int:
    """A whole number from 0 to ``most`` (a query value as text too); 400 otherwise."""
    if value is None:
        return default
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 10:  # never int("²")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        refuse(400, f"`{what}` must be a whole number from 0 to {most}.")
    return value


def parse_history(body: Mapping[str, Any], thread_id: str) -> tuple[int, str | None, str | None, dict[str, Any]]:
    """``POST /threads/{id}/history``: ``(limit, before checkpoint id, from checkpoint id, metadata filter)``."""
    unknown = sorted(set(body) - {"limit", "before", "metadata", "checkpoint", "select"})
    if unknown:
        refuse(400, "Unknown field(s) in the body; history takes limit, before, metadata and checkpoint.")
    start = parse_checkpoint(body.get("checkpoint"), thread_id)
    before = body.get("before")
    if isinstance(before, Mapping):  # a checkpoint config (``{"configurable": {...}}``) or the checkpoint itself
        inner = before.get("configurable") or before
        if not isinstance(inner, Mapping):
            refuse(400, "`before` must be a checkpoint id or a checkpoint config ({configurable: {checkpoint_id}}).")
        before = inner.get("checkpoint_id")
    if before is not None:
        check_id(before, "before")
    return parse_limit(body.get("limit"), 10), before, start, _object(body, "metadata")


def parse_search(body: Mapping[str, Any], allowed: Sequence[str]) -> tuple[int, int, dict[str, Any]]:
    """A search body: ``(limit, offset, the body's filters)``; keys outside ``allowed`` are a 400."""
    unknown = sorted(set(body) - {"limit", "offset", "select", "sort_by", "sort_order", *allowed})
    if unknown:
        refuse(400, f"Unknown field(s) in the body; this search takes limit, offset, {', '.join(allowed)}.")
    return parse_limit(body.get("limit"), 10), parse_limit(body.get("offset"), 0, "offset", 2**31), dict(body)
