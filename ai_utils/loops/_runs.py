"""What `LoopRunner` does around a graph run: the call's plan, the gate rules, and the run's record in the store.

Gate rules (a decision answers a gate; ``gate_id`` is in the interrupt chunk):

- ``decision=..., gate_id=g``: answers gate ``g`` only; a ``g`` that is not waiting on the thread → `UserError`.
- ``decision=...`` without ``gate_id``: answers the gate waiting now, but only while the run has answered no
  gate before (according to its run store). From a run's second gate on, a bare decision is refused
  (`UserError` naming the waiting gate): an "approve" sent twice (a double click, a retried request) can then
  never approve a gate its sender has not seen.
- Several items pending at once (an agent step's model asked for two gated calls in one reply): the house's
  multi-item rule (`ai_utils.streaming._decisions`): one ``decision`` is refused (`UserError` naming
  ``decisions=`` and ``approve_all``); ``decisions=`` answers every item — a list in item order (bare, like a
  bare decision), or a mapping keyed by item id or ``gate_id`` (it names its gates). With ``gate_id``, the
  decision(s) answer that gate's items only.
- Either way the store claims the gate atomically first (`LoopRunStore.claim`), so two processes answering one
  gate — or one answer arriving twice at once — run the gated call once; the loser gets `UserError`.
- The claimed decision is kept with the run (state ``approval_approved``, then ``resuming``) until the run moves
  past the gate. A process that dies in between leaves the checkpoint still waiting at the gate; a call with
  neither input nor decision then resumes it with the kept decision (the run is never stuck, and never asks again).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langgraph.types import Command, Interrupt, StateSnapshot

from ai_utils._run.calls import Decisions
from ai_utils.client import Decision
from ai_utils.exceptions import AiUtilsError, LoopError, UserError
from ai_utils.loops._graph import run_info
from ai_utils.loops._permissions import APPROVAL_KIND
from ai_utils.loops._store import LoopRun, LoopRunStore, RunState, record
from ai_utils.loops._twins import Twin
from ai_utils.streaming._decisions import to_resume
from ai_utils.streaming._interrupts import slots

__all__ = ["Plan", "begin", "finish_twin", "gate_of", "outcome_state", "plan_call", "run_id_of"]

_ANSWERS = '"approve", "reject", {"type": "approve"} or {"type": "reject", "message": "..."}'
_RUN_NAMESPACE = uuid.UUID("0b6f3f8e-3c47-4f0e-9a61-2f0e2f6a9c11")


def gate_of(interrupt: Interrupt) -> str:
    """A pending interrupt's gate id: a loop approval's own ``gate_id``, else the interrupt id."""
    value = interrupt.value
    if isinstance(value, Mapping) and isinstance(value.get("gate_id"), str):
        return str(value["gate_id"])
    return interrupt.id


def run_id_of(values: Mapping[str, Any], thread_id: str) -> str:
    """The run id a checkpoint holds (runs stored before run ids existed get one derived from the thread)."""
    run_id = (values.get("run") or {}).get("run_id")
    return str(run_id) if run_id else uuid.uuid5(_RUN_NAMESPACE, thread_id).hex


@dataclass
class Plan:
    """One call, decided before anything runs."""

    action: str  # "start" | "decide" | "continue" | "recover"
    graph_input: Any
    run_id: str
    thread_id: str
    gates: list[str] = field(default_factory=list)  # the gates this decision answers
    waiting: list[str] = field(default_factory=list)  # every gate waiting now
    approve: bool = False
    bare: bool = False  # a decision without gate_id
    steps: list[str] = field(default_factory=list)


def _check_answers(resume: Any, targets: Sequence[Interrupt]) -> None:
    """A loop approval takes approve/reject only; other interrupts (e.g. guardrails') are the mapper's to check."""
    values = {targets[0].id: resume} if len(targets) == 1 else dict(resume)
    for interrupt in targets:
        if isinstance(interrupt.value, Mapping) and interrupt.value.get("type") == APPROVAL_KIND:
            answer = values.get(interrupt.id)
            kind = answer.get("type") if isinstance(answer, Mapping) else answer
            if kind not in ("approve", "reject"):
                raise UserError(f"A loop approval takes {_ANSWERS}; got {answer!r} for gate {gate_of(interrupt)!r}.")


def _by_item(decisions: Decisions | None, targets: Sequence[Interrupt]) -> Decisions | None:
    """A ``decisions`` mapping may be keyed by gate id too: those keys become the gate's item id."""
    if not isinstance(decisions, Mapping):
        return decisions
    by_gate: dict[str, list[str]] = {}
    for slot in slots(targets):
        by_gate.setdefault(gate_of(slot.interrupt), []).append(str(slot.item["id"]))
    # A gate with several items (a batched HITL interrupt) is answered per item, never by its gate id.
    single = {gate: ids[0] for gate, ids in by_gate.items() if len(ids) == 1}
    return {single.get(key, key): value for key, value in decisions.items()}


def _decide(
    decision: Decision | None, decisions: Decisions | None, gate_id: str | None, snapshot: StateSnapshot, thread_id: str
) -> Plan:
    pending = list(snapshot.interrupts)
    waiting = [gate_of(i) for i in pending]
    if not pending:
        raise UserError(
            f"Thread {thread_id!r} waits for no decision (gate_id={gate_id!r}): it has no pending approval. Start a "
            "run with `input`, or read the run's state with state()."
        )
    run_id = run_id_of(snapshot.values, thread_id)
    targets = pending
    if gate_id is not None:
        if not isinstance(gate_id, str) or gate_id not in waiting:
            raise UserError(
                f"Gate {gate_id!r} is not waiting on thread {thread_id!r}; waiting: {waiting!r}. It was answered "
                "already or belongs to another run: answer the gate from the latest interrupt chunk (its `gate_id`)."
            )
        targets = [pending[waiting.index(gate_id)]]
    # The house's one mapper applies the multi-item rule: one `decision` never answers several pending items.
    command = to_resume(decision, _by_item(decisions, targets), pending=targets)
    _check_answers(command.resume, targets)
    answers = (
        [decision] if decisions is None else list(decisions.values() if isinstance(decisions, Mapping) else decisions)
    )
    approve = any(_approves(answer) for answer in answers)
    if gate_id is not None:
        keyed: Any = command if len(pending) == 1 else Command(resume={targets[0].id: command.resume})
        return Plan("decide", keyed, run_id, thread_id, [gate_id], waiting, approve)
    # A mapping names the items it answers; a bare decision or a positional list does not.
    bare = not isinstance(decisions, Mapping)
    return Plan("decide", command, run_id, thread_id, waiting, waiting, approve, bare=bare)


def _approves(decision: object) -> bool:
    return (decision.get("type") if isinstance(decision, Mapping) else decision) == "approve"


def plan_call(
    input: Any,
    *,
    thread_id: str,
    decision: Decision | None,
    gate_id: str | None,
    snapshot: StateSnapshot,
    start: Any,
    decisions: Decisions | None = None,
) -> Plan:
    """What this call does: start a run (``start(run_id)`` builds its input), answer a gate, or continue one."""
    if decision is not None or decisions is not None:
        if input is not None:
            raise UserError(
                "Pass either `input` (start a run) or `decision`/`decisions` (answer its approvals), not both."
            )
        return _decide(decision, decisions, gate_id, snapshot, thread_id)
    if gate_id is not None:
        raise UserError(
            f"gate_id={gate_id!r} names the gate a `decision` answers; pass `decision=` with it (or `decisions=`)."
        )
    if input is None:
        if snapshot.next and not snapshot.interrupts:
            # A run cut short (a raising tool, a crash): go on from its last stored step.
            return Plan("continue", None, run_id_of(snapshot.values, thread_id), thread_id)
        if snapshot.interrupts:
            # Maybe a decision was claimed and its process died before the gate was passed: `begin` looks.
            waiting = [gate_of(i) for i in snapshot.interrupts]
            return Plan("recover", None, run_id_of(snapshot.values, thread_id), thread_id, waiting=waiting)
        raise UserError(
            f"Nothing to run on thread {thread_id!r}: pass `input` (the context), `decision` to answer a "
            "pending approval, or neither to continue a run that stopped half-way."
        )
    if snapshot.interrupts:
        raise UserError(
            f"Thread {thread_id!r} waits for an approval (gates {[gate_of(i) for i in snapshot.interrupts]!r}); "
            "answer it with `decision='approve'` or `decision='reject'` (and its `gate_id`) before starting a new run."
        )
    run_id = uuid.uuid4().hex
    return Plan("start", start(run_id), run_id, thread_id)


def _store_call(twin: Twin) -> Twin:
    """A store call whose failure is a `LoopError` (a custom store may raise anything)."""

    def sync() -> Any:
        try:
            return twin[0]()
        except AiUtilsError:
            raise
        except Exception as error:
            raise LoopError(f"The loop run store failed ({type(error).__name__}); no step ran.") from error

    async def async_() -> Any:
        try:
            return await twin[1]()
        except AiUtilsError:
            raise
        except Exception as error:
            raise LoopError(f"The loop run store failed ({type(error).__name__}); no step ran.") from error

    return sync, async_


def _recover(store: LoopRunStore, plan: Plan, known: LoopRun) -> Generator[Twin, Any, None]:
    """Resume a gate whose decision was claimed by a process that died before passing it."""
    run_id = plan.run_id
    raw = None
    if known.state in ("approval_approved", "resuming"):
        raw = yield _store_call((lambda: store.decision_of(run_id), lambda: store.adecision_of(run_id)))
    kept = json.loads(raw) if raw else None
    if not isinstance(kept, Mapping) or not set(kept.get("gates") or ()) <= set(plan.waiting):
        raise UserError(
            f"Thread {plan.thread_id!r} waits for a decision at gate(s) {plan.waiting!r}: answer it with "
            "`decision='approve'` or `decision='reject'` and its `gate_id`."
        )
    plan.graph_input = Command(resume=kept["resume"])


def begin(store: LoopRunStore, plan: Plan, loop: str, snapshot: StateSnapshot) -> Generator[Twin, Any, None]:
    """Record the call before the graph runs; a store that cannot be reached fails here, before any step."""
    run_id = plan.run_id
    if plan.action == "start":
        new = record(run_id, plan.thread_id, loop, "running")
        yield _store_call((lambda: store.put(new), lambda: store.aput(new)))
        return
    known: LoopRun | None = yield _store_call((lambda: store.get(run_id), lambda: store.aget(run_id)))
    if known is None:
        # The run started with another store (or before this process had one): record it as the checkpoint says.
        state: RunState = "awaiting_approval" if plan.waiting else "running"
        adopted = replace(
            record(run_id, plan.thread_id, loop, state, step_keys=run_info(snapshot.values).get("taken") or ()),
            gate_ids=tuple(plan.waiting),
        )
        known = adopted
        yield _store_call((lambda: store.put(adopted), lambda: store.aput(adopted)))
    if plan.action == "recover":
        yield from _recover(store, plan, known)
    if plan.action == "decide":
        if plan.bare and known.gates_answered > 0:
            raise UserError(
                f"Run {run_id!r} on thread {plan.thread_id!r} already answered a gate, so a decision must name the "
                f"gate it answers (a repeated 'approve' must not approve a gate its sender has not seen). Waiting: "
                f"{plan.waiting!r}; pass gate_id=... from the interrupt chunk."
            )
        kept = json.dumps({"gates": plan.gates, "resume": plan.graph_input.resume})
        claimed = yield _store_call(
            (
                lambda: store.claim(run_id, plan.gates, approve=plan.approve, decision=kept),
                lambda: store.aclaim(run_id, plan.gates, approve=plan.approve, decision=kept),
            )
        )
        if claimed is None:
            raise UserError(
                f"Gate(s) {plan.gates!r} of run {run_id!r} are no longer waiting: another call or process answered "
                "them. Read the run's state with state(thread_id) and answer the gate that waits now."
            )
        if not plan.approve:
            return  # a rejection claims the gate straight into `resuming`
    yield _store_call(
        (
            lambda: store.update(run_id, state="resuming", step_keys=None),
            lambda: store.aupdate(run_id, state="resuming", step_keys=None),
        )
    )


def outcome_state(values: Mapping[str, Any], interrupts: Sequence[Interrupt]) -> tuple[RunState, list[str], str | None]:
    """The state to record after a graph run: state, waiting gate ids, error type."""
    if interrupts:
        return "awaiting_approval", [gate_of(i) for i in interrupts], None
    run = run_info(values)
    if run.get("status") == "failed":
        error = run.get("error") or {}
        return "failed", [], str(error.get("type") or "LoopError")
    if run.get("status") == "completed":
        return "completed", [], None
    return "running", [], None


def finish_twin(store: LoopRunStore, run_id: str, values: Mapping[str, Any], interrupts: Sequence[Interrupt]) -> Twin:
    """Record how the graph run ended."""
    state, gates, error = outcome_state(values, interrupts)
    keys = list(run_info(values).get("taken") or ())
    return (
        lambda: store.update(run_id, state=state, step_keys=keys, gate_ids=gates, error=error),
        lambda: store.aupdate(run_id, state=state, step_keys=keys, gate_ids=gates, error=error),
    )
