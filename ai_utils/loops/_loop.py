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
from ai_utils.loops._hooks import Hook, HookEvent, Hooks, hooks_from, hooks_from_json, hooks_to_json
from ai_utils.loops._limits import (
    MAX_DEFINITION_CHARS,
    MAX_EXPRESSION_CHARS,
    MAX_PERMISSIONS,
    MAX_STEPS,
    data_problem,
)
from ai_utils.loops._rules import Permission, permission_from_json
from ai_utils.loops._steps import (
    END,
    AgentStep,
    Next,
    Step,
    ToolStep,
    When,
    check_bindings,
    check_name,
    fields_of,
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
        hooks: hook event -> its hooks, in order.
    """

    name: str
    start: str
    steps: Mapping[str, Step]
    permissions: tuple[Permission, ...]
    result: Mapping[str, Any] | None
    protected_roots: frozenset[str]
    programs: Mapping[str, Program] = field(repr=False, compare=False)
    hooks: Hooks = field(default_factory=dict)

    def _identity(self) -> str:
        try:
            return json.dumps(self.to_json(), sort_keys=True)
        except LoopDefinitionError:  # function hooks have no JSON form: such a loop equals only itself
            return f"loop@{id(self)}"

    def __eq__(self, other: object) -> bool:
        """Two loops are equal when their JSON forms are (so ``Loop.from_json(loop.to_json()) == loop``)."""
        return isinstance(other, Loop) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def writes(self, step_key: str) -> str:
        """The context path a step writes: its ``save_as``, else its key."""
        step = self.steps[step_key]
        return step.save_as if isinstance(step, ToolStep) and step.save_as else step_key

    def to_json(self) -> dict[str, Any]:
        """The loop as JSON-compatible data (``json.dumps`` works on it); `Loop.from_json` reads it back.

        An agent step's pydantic ``output`` is stored as its JSON schema; read back, the step's answers are
        validated against that schema as the pydantic model would validate them, and saved as a dict.

        Raises:
            LoopDefinitionError: the loop has function hooks (only `command_hook` hooks have a JSON form).
        """
        data: dict[str, Any] = {
            "version": _JSON_VERSION,
            "name": self.name,
            "start": self.start,
            "steps": {key: step.to_json() for key, step in self.steps.items()},
            "permissions": [rule.to_json() for rule in self.permissions],
            "result": self.result,
            "protected_roots": sorted(self.protected_roots - {"request"}),
        }
        if self.hooks:
            data["hooks"] = hooks_to_json(self.hooks)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str | bytes) -> Loop:
        """Rebuild (and re-check) a loop from `to_json` data or its JSON text, e.g. a definition sent by a client.

        The whole value is checked first, without recursion (at most 1 MiB of text, 32 levels, 50,000 values,
        64 KiB per string, JSON types only), then every part goes through the same builders and limits as a loop
        built in code. Any problem is a `LoopDefinitionError`, never another exception.

        Raises:
            LoopDefinitionError: the data is not a valid loop definition (the message says where).
        """
        try:
            return _from_json(data)
        except LoopDefinitionError:
            raise
        except (TypeError, ValueError, LookupError, AttributeError, RecursionError) as error:
            # A safety net: the checks above should leave nothing here; a definition from outside must never
            # surface as another exception (e.g. a 500 in a server that catches LoopDefinitionError).
            raise LoopDefinitionError(
                f"Loop.from_json: not a valid loop definition ({type(error).__name__})."
            ) from error


_JSON_FIELDS = frozenset({"version", "name", "start", "steps", "permissions", "result", "protected_roots", "hooks"})


def _from_json(data: object) -> Loop:
    if isinstance(data, str | bytes):
        if len(data) > MAX_DEFINITION_CHARS:
            raise LoopDefinitionError(
                f"Loop.from_json: the definition is {len(data)} characters; the limit is {MAX_DEFINITION_CHARS}."
            )
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as error:  # json's C decoder recurses per nesting level
            raise LoopDefinitionError(
                f"Loop.from_json: not JSON ({type(error).__name__}: {str(error)[:200]})."
            ) from None
    problem = data_problem(data, allow_tuples=False)
    if problem is not None:
        raise LoopDefinitionError(f"Loop.from_json: the definition has {problem}. Send a smaller, plain definition.")
    fields = fields_of(data, where="Loop.from_json: the definition", allowed=_JSON_FIELDS)
    version = fields.get("version", _JSON_VERSION)
    if version != _JSON_VERSION:
        raise LoopDefinitionError(f"Loop.from_json: version {version!r} is not supported; this is version 1.")
    steps = fields.get("steps")
    if not isinstance(steps, Mapping):
        raise LoopDefinitionError(
            f"Loop.from_json needs the dict from Loop.to_json() with a 'steps' object, got {repr(steps)[:80]}."
        )
    if len(steps) > MAX_STEPS:
        raise LoopDefinitionError(f"Loop.from_json: {len(steps)} steps; the limit is {MAX_STEPS}.")
    rules = fields.get("permissions")
    if rules is None:
        rules = []
    if not isinstance(rules, list) or len(rules) > MAX_PERMISSIONS:
        raise LoopDefinitionError(
            f"Loop.from_json: permissions must be a list of at most {MAX_PERMISSIONS} rules, got {repr(rules)[:80]}."
        )
    roots = fields.get("protected_roots") or []
    if not isinstance(roots, list):
        raise LoopDefinitionError(f"Loop.from_json: protected_roots must be a list, got {repr(roots)[:80]}.")
    return define_loop(
        fields.get("name"),  # type: ignore[arg-type]
        start=fields.get("start"),  # type: ignore[arg-type]
        steps={_check_step_key(key, frozenset()): step_from_json(key, step) for key, step in steps.items()},
        permissions=[permission_from_json(rule, index) for index, rule in enumerate(rules)],
        result=fields.get("result"),
        protected_roots=roots,
        hooks=hooks_from_json(fields.get("hooks")),  # type: ignore[arg-type]
    )


def _check_step_key(key: object, protected: frozenset[str]) -> str:
    if not isinstance(key, str) or len(key) > 100 or not _STEP_KEY.fullmatch(key) or key == END:
        raise LoopDefinitionError(
            f"Step key {repr(key)[:80]} is not allowed: use up to 100 letters, digits and '_' (not 'end'), "
            "e.g. 'triage'.",
            step_key=key[:100] if isinstance(key, str) else None,
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
            if not isinstance(item.expr, str) or len(item.expr) > MAX_EXPRESSION_CHARS:
                raise LoopDefinitionError(
                    f"Step {key!r}: a when() expression must be a str of at most {MAX_EXPRESSION_CHARS} characters.",
                    step_key=key,
                )
            try:
                programs[item.expr] = compile_expression(item.expr)
            except ValueError as error:
                raise LoopDefinitionError(
                    f"Step {key!r}: when({item.expr[:200]!r}) is not valid CEL: {str(error)[:300]}", step_key=key
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
        problem = data_problem(step.input)
        if problem is not None:
            raise LoopDefinitionError(
                f"Step {key!r}: input must be JSON data and ctx(...) bindings ({problem}); pass plain values.",
                step_key=key,
            )
        check_bindings(step.input, where=f"step {key!r} input", step_key=key)
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
        raise LoopDefinitionError(f"result.presentation.actions must be a list, got {repr(actions)[:80]}.")
    for index, action in enumerate(actions):
        where = f"result.presentation.actions[{index}]"
        if not isinstance(action, Mapping) or not isinstance(action.get("type"), str):
            raise LoopDefinitionError(f"{where} must be a mapping with a 'type', got {repr(action)[:80]}.")
        if action["type"] == "open_url":
            url = action.get("url")
            if is_binding(url):
                continue  # checked when the run's context resolves it
            if not isinstance(url, str) or not url.lower().startswith("https://"):
                raise LoopDefinitionError(
                    f"{where} (open_url) has url={repr(url)[:80]}; only https:// URLs are allowed. Use an https URL."
                )


def _check_result(result: object) -> Mapping[str, Any] | None:
    if result is None:
        return None
    if not isinstance(result, Mapping) or set(result) - {"data", "presentation"}:
        raise LoopDefinitionError(
            f"result must be {{'data': ..., 'presentation': ...}} (no other keys), got {repr(result)[:120]}."
        )
    problem = data_problem(result)
    if problem is not None:
        raise LoopDefinitionError(f"result must be JSON data and ctx(...) bindings ({problem}).")
    check_bindings(result, where="result", step_key=None)
    presentation = result.get("presentation")
    if presentation is not None:
        if not isinstance(presentation, Mapping):
            raise LoopDefinitionError(f"result.presentation must be a mapping, got {repr(presentation)[:80]}.")
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
    hooks: Mapping[HookEvent, Sequence[Hook | Any]] | None = None,
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
        result: the run's projection, with ``ctx`` bindings; exactly two keys exist: ``data`` (any JSON data,
            ``out.data``) and ``presentation`` (``{"text": ..., "actions": [{"id", "type": "open_url", "label",
            "url"}]}``, ``out.presentation``; an ``open_url`` action's url must be https). Projected after the last
            step; a projection that fails fails the run.
        protected_roots: more caller-seeded context roots no step may overwrite (``request`` always is).
        hooks: ``{"loop:start" | "loop:end" | "step:start" | "step:end": [hook, ...]}``: functions of the event
            (`function_hook`) or sandboxed commands (`command_hook`); a hook's result is saved under its
            ``save_as``; a hook that fails fails the run (`LoopError` naming it).

    Returns:
        The checked `Loop`.

    Raises:
        LoopDefinitionError: an unknown step, invalid CEL, ``next`` naming no step, a cycle with no exit,
            an ``open_url`` action that is not https, or a step writing a protected root; the message
            names the step.
    """
    check_name(name, what="define_loop() loop name")
    if not name.strip():
        raise LoopDefinitionError(f"define_loop() needs a loop name, got {name!r}.")
    if (
        isinstance(protected_roots, str | bytes)
        or not isinstance(protected_roots, Sequence)
        or len(protected_roots) > 64
        or not all(isinstance(r, str) and r for r in protected_roots)
    ):
        raise LoopDefinitionError(
            f"protected_roots must be a list of at most 64 root names, got {repr(protected_roots)[:80]}."
        )
    for root in protected_roots:
        check_name(root, what="protected_roots entry")
    protected = frozenset(["request", *protected_roots])
    if not isinstance(steps, Mapping) or not steps or len(steps) > MAX_STEPS:
        raise LoopDefinitionError(f"Loop {name!r} needs 1 to {MAX_STEPS} steps, got steps={repr(steps)[:80]}.")
    for key, step in steps.items():
        _check_step_key(key, protected)
        if not isinstance(step, AgentStep | ToolStep):
            raise LoopDefinitionError(
                f"Step {key!r} must be made with agent_step(...) or tool_step(...), got {step!r}.", step_key=key
            )
    if not isinstance(start, str) or start not in steps:
        raise LoopDefinitionError(
            f"Loop {name!r}: start={repr(start)[:80]} is no step; steps: {sorted(steps)[:20]!r}.",
            step_key=start[:100] if isinstance(start, str) else None,
        )
    programs: dict[str, Program] = {}
    for key, step in steps.items():
        _compile_next(key, step.next, steps, programs)
        _check_write(key, step, protected)
    _check_exits(steps)
    if isinstance(permissions, str | bytes | Mapping) or not isinstance(permissions, Sequence):
        raise LoopDefinitionError(f"permissions must be a list of permission(...), got {repr(permissions)[:80]}.")
    rules = tuple(permissions)
    if len(rules) > MAX_PERMISSIONS or not all(isinstance(rule, Permission) for rule in rules):
        raise LoopDefinitionError(
            f"permissions must be at most {MAX_PERMISSIONS} rules made with permission(...), "
            f"got {repr(permissions)[:80]}."
        )
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
        hooks=hooks_from(hooks, protected),
    )
