"""`define_loop` and `Loop`: a checked, JSON-round-tripping definition of a governed loop.

Everything that can be known before a run is checked here, once: step keys, transition targets, CEL
expressions (compiled here and kept), loops that can never reach ``"end"``, bindings and result actions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ai_utils.exceptions import LoopDefinitionError
from ai_utils.loops._cel import Program, compile_expression
from ai_utils.loops._rules import Permission, permission_from_json
from ai_utils.loops._steps import (
    END,
    AgentStep,
    Next,
    Step,
    ToolStep,
    When,
    check_bindings,
    is_binding,
    step_from_json,
)

__all__ = ["Loop", "define_loop"]

_STEP_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JSON_VERSION = 1


def targets(next: Next) -> list[str]:
    """Every step key (or ``"end"``) a ``next`` may lead to."""
    return [next] if isinstance(next, str) else [item.target for item in next]


@dataclass(frozen=True, eq=False)
class Loop:
    """A governed loop definition, made by `define_loop`; run it with `LoopRunner`.

    Attributes:
        name: the loop's name.
        start: the first step's key.
        steps: step key -> step, in declaration order.
        permissions: the rules for tool calls, in declaration order.
        result: the ``{"data": ..., "presentation": ...}`` projection (with ``ctx`` bindings), or ``None``.
        protected_roots: context roots steps may not write (``request`` is always one).
    """

    name: str
    start: str
    steps: Mapping[str, Step]
    permissions: tuple[Permission, ...]
    result: Mapping[str, Any] | None
    protected_roots: frozenset[str]
    programs: Mapping[str, Program] = field(repr=False, compare=False)

    def __eq__(self, other: object) -> bool:
        """Two loops are equal when their JSON forms are (so ``Loop.from_json(loop.to_json()) == loop``)."""
        return isinstance(other, Loop) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_json(), sort_keys=True))

    def writes(self, step_key: str) -> str:
        """The context path a step writes: its ``save_as``, else its key."""
        step = self.steps[step_key]
        return step.save_as if isinstance(step, ToolStep) and step.save_as else step_key

    def to_json(self) -> dict[str, Any]:
        """The loop as JSON-compatible data (``json.dumps`` works on it); `Loop.from_json` reads it back.

        An agent step's pydantic ``output`` is stored as its JSON schema; read back, the step's answer is
        validated against that schema and saved as a dict, exactly as before.
        """
        return {
            "version": _JSON_VERSION,
            "name": self.name,
            "start": self.start,
            "steps": {key: step.to_json() for key, step in self.steps.items()},
            "permissions": [rule.to_json() for rule in self.permissions],
            "result": self.result,
            "protected_roots": sorted(self.protected_roots - {"request"}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str | bytes) -> Loop:
        """Rebuild (and re-check) a loop from `to_json` data or its JSON text.

        Raises:
            LoopDefinitionError: the data is not a valid loop definition.
        """
        if isinstance(data, str | bytes):
            try:
                data = json.loads(data)
            except ValueError as error:
                raise LoopDefinitionError(f"Loop.from_json: not JSON ({error}).") from error
        if not isinstance(data, Mapping) or not isinstance(data.get("steps"), Mapping):
            raise LoopDefinitionError(f"Loop.from_json needs the dict from Loop.to_json(), got {data!r}.")
        return define_loop(
            data.get("name"),  # type: ignore[arg-type]
            start=data.get("start"),  # type: ignore[arg-type]
            steps={key: step_from_json(step) for key, step in data["steps"].items()},
            permissions=[permission_from_json(rule) for rule in data.get("permissions") or ()],
            result=data.get("result"),
            protected_roots=list(data.get("protected_roots") or ()),
        )


def _check_step_key(key: object, protected: frozenset[str]) -> str:
    if not isinstance(key, str) or not _STEP_KEY.fullmatch(key) or key == END:
        raise LoopDefinitionError(
            f"Step key {key!r} is not allowed: use letters, digits and '_' (not 'end'), e.g. 'triage'.",
            step_key=key if isinstance(key, str) else None,
        )
    if key in protected:
        raise LoopDefinitionError(
            f"Step {key!r} would write the protected context root {key!r} (caller-seeded). Rename the step.",
            step_key=key,
        )
    return key


def _compile_next(key: str, next: Next, steps: Mapping[str, Step], programs: dict[str, Program]) -> None:
    for target in targets(next):
        if target != END and target not in steps:
            raise LoopDefinitionError(
                f"Step {key!r}: `next` names {target!r}, which is no step of this loop. "
                f"Steps: {sorted(steps)!r}; use one of them or 'end'.",
                step_key=key,
            )
    if isinstance(next, str):
        return
    for item in next:
        if isinstance(item, When) and item.expr not in programs:
            try:
                programs[item.expr] = compile_expression(item.expr)
            except ValueError as error:
                raise LoopDefinitionError(
                    f"Step {key!r}: when({item.expr!r}) is not valid CEL: {error}", step_key=key
                ) from error


def _check_exits(steps: Mapping[str, Step]) -> None:
    """Every step must be able to reach ``"end"``: a cycle with no way out would run forever."""
    can_end = {key for key, step in steps.items() if END in targets(step.next)}
    changed = True
    while changed:
        changed = False
        for key, step in steps.items():
            if key not in can_end and any(t in can_end for t in targets(step.next)):
                can_end.add(key)
                changed = True
    trapped = [key for key in steps if key not in can_end]
    if trapped:
        raise LoopDefinitionError(
            f"Step {trapped[0]!r} can never reach 'end' (a cycle with no exit: {trapped!r}). "
            "Add a transition to 'end' or to a step that reaches it.",
            step_key=trapped[0],
        )


def _check_write(key: str, step: Step, protected: frozenset[str]) -> None:
    if isinstance(step, ToolStep) and step.save_as:
        root = step.save_as.split(".", 1)[0]
        if root in protected:
            raise LoopDefinitionError(
                f"Step {key!r}: save_as={step.save_as!r} would overwrite the protected context root {root!r}. "
                "Save under another name.",
                step_key=key,
            )
    if isinstance(step, ToolStep):
        check_bindings(step.input, where=f"step {key!r} input", step_key=key)
        try:
            json.dumps(step.input)
        except (TypeError, ValueError) as error:
            raise LoopDefinitionError(
                f"Step {key!r}: input must be JSON data and ctx(...) bindings ({error}); pass plain values.",
                step_key=key,
            ) from error
    if isinstance(step, AgentStep):
        choice = step.tool_choice
        if choice is not None and not isinstance(choice, str) and choice.name not in step.tools:
            raise LoopDefinitionError(
                f"Step {key!r}: require_tool({choice.name!r}) names a tool the step does not have; "
                f"its tools: {list(step.tools)!r}. Add it to `tools`.",
                step_key=key,
            )


def _check_actions(actions: object) -> None:
    if actions is None:
        return
    if not isinstance(actions, list):
        raise LoopDefinitionError(f"result.presentation.actions must be a list, got {actions!r}.")
    for index, action in enumerate(actions):
        where = f"result.presentation.actions[{index}]"
        if not isinstance(action, Mapping) or not isinstance(action.get("type"), str):
            raise LoopDefinitionError(f"{where} must be a mapping with a 'type', got {action!r}.")
        if action["type"] == "open_url":
            url = action.get("url")
            if is_binding(url):
                continue  # checked when the run's context resolves it
            if not isinstance(url, str) or not url.lower().startswith("https://"):
                raise LoopDefinitionError(
                    f"{where} (open_url) has url={url!r}; only https:// URLs are allowed. Use an https URL."
                )


def _check_result(result: object) -> Mapping[str, Any] | None:
    if result is None:
        return None
    if not isinstance(result, Mapping) or set(result) - {"data", "presentation"}:
        raise LoopDefinitionError(f"result must be {{'data': ..., 'presentation': ...}}, got {result!r}.")
    check_bindings(result, where="result", step_key=None)
    presentation = result.get("presentation")
    if presentation is not None:
        if not isinstance(presentation, Mapping):
            raise LoopDefinitionError(f"result.presentation must be a mapping, got {presentation!r}.")
        _check_actions(presentation.get("actions"))
    try:
        json.dumps(result)
    except (TypeError, ValueError) as error:
        raise LoopDefinitionError(f"result must be JSON-compatible data and ctx(...) bindings: {error}.") from error
    return result


def define_loop(
    name: str,
    *,
    start: str,
    steps: Mapping[str, Step],
    permissions: Sequence[Permission],
    result: Mapping[str, Any] | None = None,
    protected_roots: Sequence[str] = (),
) -> Loop:
    """Declare a governed loop: named steps, the transitions between them and the permissions of tool calls.

    Example:
        ```python
        loop = define_loop("support-flow", start="triage", steps={
            "triage": agent_step(prompt="Classify the request.", output=Triage,
                                 next=[when("triage.needs_refund == true", "refund"), otherwise("end")]),
            "refund": tool_step("issue_refund", input={"order_id": ctx("request.order_id")}, next="end"),
        }, permissions=[permission("refunds", resource="tool", action="call", effect="approval",
                                   match={"tool": "issue_refund"}, message="Refunds need approval.")])
        ```

    Args:
        name: the loop's name.
        start: the key of the first step.
        steps: step key -> `agent_step(...)` / `tool_step(...)`.
        permissions: `permission(...)` rules; a tool call no rule matches is denied.
        result: ``{"data": ..., "presentation": {"text": ..., "actions": [...]}}`` with ``ctx`` bindings,
            projected after a successful run (``out.data``, ``out.presentation``).
        protected_roots: more caller-seeded context roots no step may overwrite (``request`` always is).

    Returns:
        The checked `Loop`.

    Raises:
        LoopDefinitionError: an unknown step, invalid CEL, ``next`` naming no step, a cycle with no exit,
            an ``open_url`` action that is not https, or a step writing a protected root; the message
            names the step.
    """
    if not isinstance(name, str) or not name.strip():
        raise LoopDefinitionError(f"define_loop() needs a loop name, got {name!r}.")
    if isinstance(protected_roots, str) or not all(isinstance(r, str) and r for r in protected_roots):
        raise LoopDefinitionError(f"protected_roots must be a list of root names, got {protected_roots!r}.")
    protected = frozenset(["request", *protected_roots])
    if not isinstance(steps, Mapping) or not steps:
        raise LoopDefinitionError(f"Loop {name!r} needs at least one step, got steps={steps!r}.")
    for key, step in steps.items():
        _check_step_key(key, protected)
        if not isinstance(step, AgentStep | ToolStep):
            raise LoopDefinitionError(
                f"Step {key!r} must be made with agent_step(...) or tool_step(...), got {step!r}.", step_key=key
            )
    if start not in steps:
        raise LoopDefinitionError(
            f"Loop {name!r}: start={start!r} is no step; steps: {sorted(steps)!r}.",
            step_key=start if isinstance(start, str) else None,
        )
    programs: dict[str, Program] = {}
    for key, step in steps.items():
        _compile_next(key, step.next, steps, programs)
        _check_write(key, step, protected)
    _check_exits(steps)
    rules = tuple(permissions)
    if not all(isinstance(rule, Permission) for rule in rules):
        raise LoopDefinitionError(f"permissions must be made with permission(...), got {permissions!r}.")
    ids = [rule.id for rule in rules]
    if len(set(ids)) != len(ids):
        raise LoopDefinitionError(f"Loop {name!r}: permission ids must be unique, got {ids!r}.")
    return Loop(
        name=name,
        start=start,
        steps=dict(steps),
        permissions=rules,
        result=_check_result(result),
        protected_roots=protected,
        programs=programs,
    )
