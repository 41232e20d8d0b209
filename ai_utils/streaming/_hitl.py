"""Human-in-the-loop helpers (the core seed's DeepAgent helpers) around THE decision mapper.

The decision builders give the answers ``decision=``/``decisions=`` take; `approve_all` gives one approval per
pending item (a batch of parallel calls needs one answer each: a single ``decision=`` for it is refused). The
other three work with a graph run directly (``agent.graph.invoke(...)``): `is_interrupt_result` and
`map_result_to_interrupt` read its raw result, `create_resume_command` builds its ``Command(resume=...)``
with `ai_utils.streaming._decisions.to_resume`, so it is exactly what ``agent.invoke(decisions=...)`` sends.

```python
paused = agent.invoke("Write both files", thread_id="t")     # {"kind": "interrupt", "items": [..., ...]}
agent.invoke(thread_id="t", decisions=approve_all(paused))
# or per item, mixed:
agent.invoke(thread_id="t", decisions=[approve_decision(), reject_decision("Not that one.")])
```
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.types import Command, Interrupt

from ai_utils.client import Decision, InterruptBatch, InterruptEvent, is_interrupt
from ai_utils.exceptions import UserError
from ai_utils.streaming._decisions import to_resume
from ai_utils.streaming._interrupts import interrupt_chunk

__all__ = [
    "approve_all",
    "approve_decision",
    "create_resume_command",
    "edit_decision",
    "is_interrupt_result",
    "map_result_to_interrupt",
    "reject_decision",
    "respond_decision",
]


def approve_decision() -> Decision:
    """The answer that runs the tool call as the model asked.

    Returns:
        ``{"type": "approve"}``.
    """
    return {"type": "approve"}


def reject_decision(message: str | None = None) -> Decision:
    """The answer that skips the tool call; the model is told it was rejected.

    Args:
        message: why, shown to the model as the tool result.

    Returns:
        ``{"type": "reject"}``, with ``"message"`` when given.

    Raises:
        UserError: ``message`` is not a str.
    """
    if message is None:
        return {"type": "reject"}
    if not isinstance(message, str):
        raise UserError(f"reject_decision(message) takes a str, got {message!r}. Pass the reason as text.")
    return {"type": "reject", "message": message}


def edit_decision(args: Mapping[str, Any]) -> Decision:
    """The answer that runs the tool call with other arguments (the tool must allow ``"edit"``).

    Args:
        args: all the arguments to run the tool with (not a patch).

    Returns:
        ``{"type": "edit", "args": {...}}``.

    Raises:
        UserError: ``args`` is not a mapping.
    """
    if not isinstance(args, Mapping):
        raise UserError(f"edit_decision(args) takes the new arguments as a mapping, got {args!r}. Pass a dict.")
    return {"type": "edit", "args": dict(args)}


def respond_decision(message: str) -> Decision:
    """The answer that skips the tool call and hands the model this text as its result.

    Args:
        message: the tool result the model sees.

    Returns:
        ``{"type": "respond", "message": ...}``.

    Raises:
        UserError: ``message`` is not a str.
    """
    if not isinstance(message, str):
        raise UserError(f"respond_decision(message) takes a str, got {message!r}. Pass the text the model sees.")
    return {"type": "respond", "message": message}


def approve_all(interrupt: InterruptEvent | InterruptBatch) -> list[Decision]:
    """One approval per pending item: ``agent.invoke(thread_id=..., decisions=approve_all(paused))``.

    Args:
        interrupt: the interrupt chunk a run returned (one ``InterruptEvent`` or an ``InterruptBatch``).

    Returns:
        ``[{"type": "approve"}, ...]``, one per item in ``items`` order.

    Raises:
        UserError: ``interrupt`` is not an interrupt chunk.
    """
    if not is_interrupt(interrupt):
        raise UserError(
            f"approve_all() takes the interrupt chunk a run returned ({{'kind': 'interrupt', ...}}), got "
            f"{type(interrupt).__name__} {reprlib.repr(interrupt)}. Check the result with `is_interrupt(result)` "
            "first (a raw graph result: `map_result_to_interrupt(result)`)."
        )
    items = interrupt.get("items")
    return [approve_decision() for _ in (items if isinstance(items, list) else [interrupt])]


def _raw_interrupts(result: object) -> list[Interrupt] | None:
    """The LangGraph interrupts a raw run result carries (``None`` when it is no raw result)."""
    if isinstance(result, Mapping) and "kind" not in result:
        value = result.get("__interrupt__")
        return list(value) if isinstance(value, Sequence) else []
    value = getattr(result, "interrupts", None)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    if isinstance(result, Sequence) and not isinstance(result, str | bytes) and result:
        if all(isinstance(item, Interrupt) for item in result):
            return list(result)
    return None


def is_interrupt_result(result: object) -> bool:
    """Tell whether a run result waits for a human.

    Args:
        result: our interrupt chunk, or a raw LangGraph result: ``agent.graph.invoke(...)``'s state dict
            (with ``"__interrupt__"``), a ``GraphOutput`` (``version="v2"``) or a ``StateSnapshot``.

    Returns:
        ``True`` when a decision is pending.
    """
    return is_interrupt(result) or bool(_raw_interrupts(result))


def map_result_to_interrupt(result: object) -> InterruptEvent | InterruptBatch | None:
    """The interrupt chunk for a run result: what ``agent.invoke`` would have returned, or ``None``.

    Args:
        result: as for `is_interrupt_result`.

    Returns:
        The ``InterruptEvent`` (one pending item) or ``InterruptBatch`` (several), or ``None`` when nothing
        is pending.
    """
    if is_interrupt(result):
        return result
    interrupts = _raw_interrupts(result)
    return interrupt_chunk(interrupts) if interrupts else None


def _decision_list(decisions: Any) -> list[Decision] | Mapping[str, Decision]:
    if isinstance(decisions, str) or (isinstance(decisions, Mapping) and "type" in decisions):
        return [decisions]  # one decision for one pending item
    if isinstance(decisions, Mapping):
        return decisions
    if isinstance(decisions, Sequence) and not isinstance(decisions, bytes) and decisions:
        return list(decisions)
    raise UserError(
        f"create_resume_command() needs the decisions, one per pending item, got {decisions!r}. "
        "Pass e.g. `[approve_decision(), reject_decision('No.')]`."
    )


def _hitl_form(decision: Decision) -> dict[str, Any]:
    """One decision in `HumanInTheLoopMiddleware`'s own form (when the pending interrupts are not known)."""
    kind = decision.get("type") if isinstance(decision, Mapping) else decision
    extra: Mapping[str, Any] = decision if isinstance(decision, Mapping) else {}
    message = extra.get("message")
    if kind == "approve":
        return {"type": "approve"}
    if kind == "reject":
        return {"type": "reject"} if message is None else {"type": "reject", "message": str(message)}
    if kind == "respond" and isinstance(message, str):
        return {"type": "respond", "message": message}
    if kind == "edit" and isinstance(extra.get("name"), str) and isinstance(extra.get("args"), Mapping):
        return {"type": "edit", "edited_action": {"name": extra["name"], "args": dict(extra["args"])}}
    if kind == "edit":
        raise UserError(
            f"create_resume_command() cannot send the edit {decision!r} without knowing its tool. Pass the "
            "thread's pending interrupts: `pending=agent.graph.get_state(config)`."
        )
    raise UserError(
        f"Unknown decision {decision!r}. Use approve_decision(), reject_decision(message), "
        "edit_decision(args) or respond_decision(message)."
    )


def create_resume_command(decisions: Any, *, pending: object = None) -> Command[Any]:
    """The ``Command(resume=...)`` that answers a paused graph run: ``agent.graph.invoke(command, config)``.

    Args:
        decisions: one answer per pending item (a list in ``items`` order, or a mapping by item id; a single
            answer is a list of one), e.g. ``[approve_decision(), reject_decision("No.")]``.
        pending: the thread's pending interrupts (``agent.graph.get_state(config)``, the raw run result, or its
            ``interrupts``). With them the command is exactly what ``agent.invoke(decisions=...)`` sends, checked
            against each item (count, allowed decisions, edit targets). Without them the command has
            `HumanInTheLoopMiddleware`'s form for the one approval request ``interrupt_on`` pauses with
            (``{"decisions": [...]}``), and an edit must name its tool (``{"type": "edit", "name", "args"}``).

    Returns:
        The resume command.

    Raises:
        UserError: no decisions, an unknown decision, or (with ``pending``) any mismatch the decision mapper finds.
    """
    answers = _decision_list(decisions)
    if pending is not None:
        interrupts = _raw_interrupts(pending)
        if interrupts is None:
            raise UserError(
                f"create_resume_command(pending=...) takes the thread's state or its interrupts, got {pending!r}. "
                "Pass `agent.graph.get_state(config)`."
            )
        return to_resume(None, answers, pending=interrupts)
    if isinstance(answers, Mapping):
        raise UserError(
            "create_resume_command() with decisions keyed by item id needs the pending interrupts: pass "
            "`pending=agent.graph.get_state(config)`, or the decisions as a list in item order."
        )
    return Command(resume={"decisions": [_hitl_form(answer) for answer in answers]})
