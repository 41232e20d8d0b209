"""LangGraph interrupts -> client interrupt items: the one place that knows the payload shapes.

Both the chunk adapter (what the client sees) and the decision mapper (what goes back into
``Command(resume=...)``) build their items here, so item ids and item order always agree.

Shapes handled:

- ``HumanInTheLoopMiddleware`` batched mode: ``{"action_requests": [...], "review_configs": [...]}`` —
  one item per action request; the item id is the interrupt id when there is one request, else
  ``f"{interrupt_id}:{index}"``; resumed with ``{"decisions": [...]}`` in request order.
- ``HumanInTheLoopMiddleware`` per-call mode: ``{"type": "tool_approval", "tool_call_id", "name", "args",
  "description"}`` — one item, id = interrupt id; resumed with a single decision.
- any other ``interrupt(value)``: one item; ``question`` = the string, or ``value["question"]``
  (``value["description"]``); ``value["options"]`` (a list) is passed on as ``options`` and ``value["gate_id"]``
  (a str, a governed loop's gate) as ``gate_id``; resumed with the caller's value unchanged.

Pending interrupts are ordered by interrupt id: arrival order in a stream depends on thread timing,
the id does not, so positional ``decisions=[...]`` always mean the same items on both sides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from langgraph.types import Interrupt

from ai_utils.client import DECISION_TYPES as ALL_DECISIONS
from ai_utils.client import InterruptBatch, InterruptEvent

__all__ = ["ALL_DECISIONS", "Slot", "interrupt_chunk", "slots"]

Shape = Literal["batched", "per_call", "plain"]


@dataclass(frozen=True, slots=True)
class Slot:
    """One pending decision: the client item plus what the resume side needs to answer it."""

    interrupt: Interrupt
    shape: Shape
    item: InterruptEvent
    alias: str | None = None  # a tool call id that may key a decisions mapping (per-call mode only)


def _allowed_from_schema(schema: object) -> list[str]:
    """Allowed decision types from a per-call ``response_schema`` (JSON Schema with a ``type`` discriminator)."""
    if isinstance(schema, Mapping):
        mapping = schema.get("discriminator", {}).get("mapping")
        if isinstance(mapping, Mapping) and mapping:
            return [str(k) for k in mapping]
        const = schema.get("properties", {}).get("type", {}).get("const")
        if isinstance(const, str):
            return [const]
    return list(ALL_DECISIONS)


def _item(item_id: str, question: object, decisions: Iterable[object], tool: object, args: object) -> InterruptEvent:
    return {
        "kind": "interrupt",
        "id": item_id,
        "question": "" if question is None else str(question),
        "decisions": [str(d) for d in decisions],
        "tool_name": None if tool is None else str(tool),
        "args": dict(args) if isinstance(args, Mapping) else None,
    }


def _slots_of(interrupt: Interrupt) -> list[Slot]:
    value = interrupt.value
    iid = interrupt.id
    if isinstance(value, Mapping) and isinstance(value.get("action_requests"), list):
        requests = value["action_requests"]
        configs = value.get("review_configs") or []
        out = []
        for index, request in enumerate(requests):
            # review_configs are appended together with action_requests, so they line up by position.
            config = configs[index] if index < len(configs) else {}
            item_id = iid if len(requests) == 1 else f"{iid}:{index}"
            allowed = config.get("allowed_decisions") or ALL_DECISIONS
            item = _item(item_id, request.get("description"), allowed, request.get("name"), request.get("args"))
            out.append(Slot(interrupt, "batched", item))
        return out
    if isinstance(value, Mapping) and value.get("type") == "tool_approval":
        allowed = _allowed_from_schema(interrupt.response_schema)
        item = _item(iid, value.get("description"), allowed, value.get("name"), value.get("args"))
        alias = value.get("tool_call_id")
        return [Slot(interrupt, "per_call", item, alias if isinstance(alias, str) else None)]
    if isinstance(value, Mapping):
        question = value.get("question", value.get("description"))
        decisions = value.get("decisions")
        allowed = decisions if isinstance(decisions, list) else []
        item = _item(iid, question, allowed, value.get("tool_name"), value.get("args"))
        options = value.get("options")
        if isinstance(options, list | tuple):
            item["options"] = list(options)
        gate_id = value.get("gate_id")
        if isinstance(gate_id, str):
            item["gate_id"] = gate_id
        return [Slot(interrupt, "plain", item)]
    return [Slot(interrupt, "plain", _item(iid, value, [], None, None))]


def slots(interrupts: Iterable[Interrupt]) -> list[Slot]:
    """All pending decisions of ``interrupts`` (deduplicated by id, ordered by interrupt id)."""
    unique = {i.id: i for i in interrupts}
    return [slot for iid in sorted(unique) for slot in _slots_of(unique[iid])]


def interrupt_chunk(interrupts: Sequence[Interrupt]) -> InterruptEvent | InterruptBatch | None:
    """The client chunk for the pending ``interrupts``: one item alone, several as a batch, none as ``None``.

    Args:
        interrupts: LangGraph ``Interrupt`` objects, e.g. ``graph.get_state(config).interrupts``.

    Returns:
        An ``InterruptEvent``, an ``InterruptBatch`` or ``None``.
    """
    items = [slot.item for slot in slots(interrupts)]
    if not items:
        return None
    if len(items) == 1:
        return items[0]
    return {"kind": "interrupt", "items": items}
