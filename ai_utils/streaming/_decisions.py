"""THE decision mapper: the user's ``decision=`` / ``decisions=`` -> ``Command(resume=...)``.

Accepted answers (``ai_utils.client.Decision``): ``"approve"``, ``"reject"``,
``{"type": "approve"}``, ``{"type": "reject", "message": str}``, ``{"type": "edit", "args": {...}}``,
``{"type": "respond", "message": str}``. They become ``HumanInTheLoopMiddleware`` decisions;
``edit`` turns into ``{"type": "edit", "edited_action": {"name": <tool>, "args": {...}}}``.
A plain ``interrupt(value)`` gets the answer unchanged as its resume value.

- ``decision``: the answer when exactly one item is pending (several pending items need ``decisions``:
  a single answer never approves calls the human did not see; ``approve_all(interrupt)`` builds one
  approval per item);
- ``decisions``: a list in item order (the order of ``InterruptBatch.items``), or a mapping keyed by
  item id (``InterruptEvent.id``; per-call HITL items also by tool call id); it must answer every item.

One pending interrupt is resumed with its value, several with a map keyed by interrupt id, as
LangGraph requires.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.types import Command, Interrupt

from ai_utils.client import DECISION_TYPES, Decision
from ai_utils.exceptions import UserError
from ai_utils.streaming._interrupts import Slot, slots

__all__ = ["to_resume"]

_FORMS = (
    '"approve", "reject", {"type": "reject", "message": ...}, {"type": "edit", "args": {...}} '
    'or {"type": "respond", "message": ...}'
)


def to_resume(
    decision: Decision | None = None,
    decisions: Sequence[Decision] | Mapping[str, Decision] | None = None,
    *,
    pending: Sequence[Interrupt],
) -> Command[Any]:
    """Build the resume command for the interrupts a thread is waiting on.

    Args:
        decision: the answer when exactly one item is pending.
        decisions: one answer per item: a list in item order or a mapping keyed by item id.
        pending: the thread's pending interrupts, e.g. ``graph.get_state(config).interrupts``.

    Returns:
        ``Command(resume=...)`` to pass as the graph input.

    Raises:
        UserError: no or both of ``decision``/``decisions``; nothing pending; one ``decision`` for several
            pending items; a count or key mismatch;
            an unknown decision form; a decision the tool does not allow.
    """
    if (decision is None) == (decisions is None):
        raise UserError(
            "Pass exactly one of `decision` (one answer) or `decisions` (one per pending item); "
            f"got decision={decision!r}, decisions={decisions!r}."
        )
    items = slots(pending)
    if not items:
        raise UserError(
            "This thread has no pending interrupt, so there is nothing to decide. "
            "Send a new `input` instead of `decision`/`decisions`."
        )
    answers = _answers(decision, decisions, items)
    values: dict[str, Any] = {}
    for slot, answer in zip(items, answers, strict=True):
        iid = slot.interrupt.id
        if slot.shape == "batched":
            values.setdefault(iid, {"decisions": []})["decisions"].append(_normalise(answer, slot))
        elif slot.shape == "per_call":
            values[iid] = _normalise(answer, slot)
        else:
            values[iid] = answer
    if len(values) == 1:
        return Command(resume=next(iter(values.values())))
    return Command(resume=values)


def _answers(
    decision: Decision | None,
    decisions: Sequence[Decision] | Mapping[str, Decision] | None,
    items: list[Slot],
) -> list[Decision]:
    ids = [slot.item["id"] for slot in items]
    if decisions is None:
        if len(items) > 1:
            # One answer for several items would approve (or reject) calls the human never looked at.
            raise UserError(
                f"`decision={decision!r}` answers one item, but {len(items)} items are pending ({ids}). "
                "Pass `decisions=[...]` with one answer per item (in `items` order, or a mapping by item id), "
                "e.g. `decisions=approve_all(interrupt)` to approve them all."
            )
        return [decision]  # type: ignore[list-item]
    if isinstance(decisions, Mapping):
        by_id: dict[str, Decision] = {}
        for slot in items:
            key = slot.item["id"] if slot.item["id"] in decisions else slot.alias
            if key is None or key not in decisions:
                raise UserError(
                    f"`decisions` has no answer for pending item {slot.item['id']!r}; pending items: {ids}. "
                    "Answer every item."
                )
            by_id[str(key)] = decisions[key]
        unknown = sorted(set(decisions) - set(by_id))
        if unknown:
            raise UserError(f"`decisions` names items that are not pending: {unknown}; pending items: {ids}.")
        return list(by_id.values())
    if isinstance(decisions, str | bytes) or not isinstance(decisions, Sequence):
        raise UserError(
            f"`decisions` must be a list or a mapping of item id to answer, got {decisions!r}. "
            "For one answer use `decision=`."
        )
    if len(decisions) != len(items):
        raise UserError(
            f"`decisions` has {len(decisions)} answer(s) but {len(items)} item(s) are pending ({ids}). "
            "Pass exactly one answer per pending item, in order."
        )
    return list(decisions)


def _type_of(answer: object) -> object:
    return answer.get("type") if isinstance(answer, Mapping) else answer


def _normalise(answer: Decision, slot: Slot) -> dict[str, Any]:
    """One answer -> a ``HumanInTheLoopMiddleware`` decision dict, checked against the tool's allowed list."""
    tool = slot.item["tool_name"] or ""
    kind = _type_of(answer)
    if kind not in DECISION_TYPES:
        raise UserError(f"Unknown decision {answer!r} for tool {tool!r}. Use {_FORMS}.")
    allowed = slot.item["decisions"]
    if kind not in allowed:
        raise UserError(
            f"Decision {kind!r} is not allowed for tool {tool!r} (item {slot.item['id']!r}); "
            f"allowed: {', '.join(allowed)}. Choose one of those."
        )
    extra: Mapping[str, Any] = answer if isinstance(answer, Mapping) else {}
    if kind == "approve":
        return {"type": "approve"}
    if kind == "reject":
        message = extra.get("message")
        return {"type": "reject"} if message is None else {"type": "reject", "message": str(message)}
    if kind == "edit":
        args = extra.get("args")
        if not isinstance(args, Mapping):
            raise UserError(f"An edit of tool {tool!r} needs new arguments: {{'type': 'edit', 'args': {{...}}}}.")
        return {"type": "edit", "edited_action": {"name": tool, "args": dict(args)}}
    message = extra.get("message")
    if not isinstance(message, str):
        raise UserError(f"A respond decision for tool {tool!r} needs a text: {{'type': 'respond', 'message': '...'}}.")
    return {"type": "respond", "message": message}
