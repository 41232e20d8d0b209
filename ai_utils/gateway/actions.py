"""Actions the model may propose, gated by a policy: registry, directives and context blocks.

```python
from ai_utils.gateway.actions import ActionRegistry, define_action, parse_assistant_directives

actions = ActionRegistry([
    define_action(id="ticket.summarize", description="Summarize a ticket.", risk="safe",
                  availability="authenticated"),
    define_action(id="ticket.issue_refund", description="Issue a refund.", risk="restricted", availability="admin"),
])
reply = '''Here is your summary.
!> ticket.summarize {"id": "TKT-1"}
?> Draft a reply'''
parsed = parse_assistant_directives(reply)   # .text, .actions, .follow_ups, .parse_errors
[actions.validate(p, {"user_id": "u1"}) for p in parsed.actions]   # status: allowed / requires_confirmation / blocked
```
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_args

from pydantic import BaseModel, ValidationError

from ai_utils.exceptions import UserError
from ai_utils.gateway.actor import Actor, to_actor

__all__ = [
    "ActionAvailability",
    "ActionDefinition",
    "ActionPolicy",
    "ActionPolicyContext",
    "ActionPolicyResult",
    "ActionProposal",
    "ActionRegistry",
    "ActionRisk",
    "ContextBlock",
    "DirectiveResult",
    "ParsedDirectives",
    "ValidatedAction",
    "ValidatedActionStatus",
    "default_action_policy",
    "define_action",
    "parse_assistant_directives",
    "render_context_blocks",
    "validate_directives",
]

ActionRisk = Literal["safe", "confirm", "restricted"]
ActionAvailability = Literal["public", "authenticated", "pro", "admin"]
ValidatedActionStatus = Literal["allowed", "requires_confirmation", "blocked"]


@dataclass(frozen=True, slots=True)
class ActionDefinition:
    """An action the model may propose. Build it with `define_action`.

    Args:
        id: globally unique, dot-separated by convention.
        description: what it does (the model sees this).
        risk: ``"safe"`` runs on proposal, ``"confirm"`` needs acceptance, ``"restricted"`` is blocked unless a
            custom policy opens it.
        availability: who may use it: ``"public"``, ``"authenticated"``, ``"pro"`` or ``"admin"``.
        schema: validates params: a pydantic model class, an object with ``parse``/``model_validate``, or a
            callable returning the parsed params.
        aliases: other ids that resolve to this action.
    """

    id: str
    description: str
    risk: ActionRisk
    availability: ActionAvailability = "public"
    schema: Any = None
    aliases: tuple[str, ...] = ()


def define_action(
    *,
    id: str,
    description: str,
    risk: ActionRisk,
    availability: ActionAvailability = "public",
    schema: Any = None,
    aliases: Iterable[str] = (),
) -> ActionDefinition:
    """Define an action (checks risk and availability).

    Args:
        id: the unique id.
        description: what it does.
        risk: ``"safe"``, ``"confirm"`` or ``"restricted"``.
        availability: ``"public"``, ``"authenticated"``, ``"pro"`` or ``"admin"``.
        schema: params validator (see `ActionDefinition`).
        aliases: alternate ids.

    Returns:
        The `ActionDefinition`.

    Raises:
        UserError: an empty id or an unknown risk/availability.
    """
    if not id or not isinstance(id, str):
        raise UserError(f"An action id must be a non-empty string, got {id!r}. Use e.g. 'ticket.summarize'.")
    if risk not in get_args(ActionRisk):
        raise UserError(f"Unknown risk {risk!r} for action {id!r}. Use 'safe', 'confirm' or 'restricted'.")
    if availability not in get_args(ActionAvailability):
        raise UserError(
            f"Unknown availability {availability!r} for action {id!r}. Use 'public', 'authenticated', 'pro' or 'admin'."
        )
    return ActionDefinition(id, description, risk, availability, schema, tuple(aliases))


@dataclass(frozen=True, slots=True)
class ActionProposal:
    """An action the model proposed.

    Args:
        id: the action id (or an alias).
        params: its parameters.
    """

    id: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ValidatedAction:
    """A proposal after the policy gate.

    Args:
        id: the canonical action id (the proposal's id when unknown).
        params: the params (parsed by the schema when there is one).
        status: ``"allowed"`` (execute now), ``"requires_confirmation"`` (ask the operator) or ``"blocked"``.
        reason: why it is not simply allowed.
        action: the definition, ``None`` for unknown actions.
    """

    id: str
    params: dict[str, Any]
    status: ValidatedActionStatus
    reason: str | None = None
    action: ActionDefinition | None = None


@dataclass(frozen=True, slots=True)
class ActionPolicyContext:
    """What an action policy sees.

    Args:
        action: the resolved definition.
        params: the validated params.
        actor: the actor, or ``None``.
    """

    action: ActionDefinition
    params: dict[str, Any]
    actor: Actor | None


@dataclass(frozen=True, slots=True)
class ActionPolicyResult:
    """An action policy's verdict.

    Args:
        status: ``"allowed"``, ``"requires_confirmation"`` or ``"blocked"``.
        reason: why, for anything but allowed.
    """

    status: ValidatedActionStatus
    reason: str | None = None


ActionPolicy: TypeAlias = Callable[[ActionPolicyContext], "ActionPolicyResult | Mapping[str, Any]"]
"""``policy(context) -> ActionPolicyResult`` or the seed's mapping ``{"status": ..., "reason": ...}``."""


def _verdict(result: Any, action_id: str) -> ActionPolicyResult:
    """An action policy's return value as an `ActionPolicyResult` (a mapping is accepted as the seed has it)."""
    status: Any
    reason: Any
    if isinstance(result, ActionPolicyResult):
        status, reason = result.status, result.reason
    elif isinstance(result, Mapping):
        status, reason = result.get("status"), result.get("reason")
    else:
        raise UserError(
            f"The action policy returned {result!r} for {action_id!r}; return ActionPolicyResult(status, reason) "
            'or {"status": "allowed" | "requires_confirmation" | "blocked", "reason": ...}.'
        )
    if status not in get_args(ValidatedActionStatus):
        raise UserError(
            f"The action policy returned status {status!r} for {action_id!r}; use one of "
            f"{', '.join(get_args(ValidatedActionStatus))}."
        )
    if reason is not None and not isinstance(reason, str):
        raise UserError(f"The action policy returned reason {reason!r} for {action_id!r}; a reason must be a str.")
    return ActionPolicyResult(status, reason)


def default_action_policy(context: ActionPolicyContext) -> ActionPolicyResult:
    """The built-in policy: availability tier first, then risk.

    Availability: ``public`` for everyone; ``authenticated`` needs ``actor.user_id``; ``pro`` needs
    ``plan == "pro"`` (admins pass); ``admin`` needs ``"admin"`` in ``actor.roles``. Risk: ``safe`` → allowed,
    ``confirm`` → requires_confirmation, ``restricted`` → blocked.

    Args:
        context: the proposal.

    Returns:
        The verdict.
    """
    action, actor = context.action, context.actor
    is_admin = actor is not None and "admin" in actor.roles
    if action.availability == "authenticated" and (actor is None or not actor.user_id):
        return ActionPolicyResult("blocked", f"Action {action.id!r} needs a signed-in user.")
    if action.availability == "pro" and not (is_admin or (actor is not None and actor.plan == "pro")):
        return ActionPolicyResult("blocked", f"Action {action.id!r} needs the pro plan.")
    if action.availability == "admin" and not is_admin:
        return ActionPolicyResult("blocked", f"Action {action.id!r} is for admins only.")
    if action.risk == "restricted":
        return ActionPolicyResult("blocked", f"Action {action.id!r} is restricted; a custom policy must allow it.")
    if action.risk == "confirm":
        return ActionPolicyResult("requires_confirmation", f"Action {action.id!r} needs confirmation before it runs.")
    return ActionPolicyResult("allowed")


def _parse_params(schema: Any, params: dict[str, Any]) -> dict[str, Any]:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_validate(params).model_dump()
    for method in ("model_validate", "parse"):
        parse = getattr(schema, method, None)
        if callable(parse):
            return _as_params(parse(params))
    return _as_params(schema(params))


def _as_params(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.model_dump()
    return dict(value) if isinstance(value, Mapping) else {"value": value}


class ActionRegistry:
    """A mutable set of actions with a policy gate.

    Args:
        actions: initial definitions (ids and aliases must be unique).
        policy: decides per proposal; default `default_action_policy`. It returns an `ActionPolicyResult` or
            the seed's ``{"status", "reason"}`` mapping; anything else is a `UserError`.

    Raises:
        UserError: a duplicate id or alias.
    """

    def __init__(self, actions: Iterable[ActionDefinition] = (), policy: ActionPolicy | None = None) -> None:
        self.policy: ActionPolicy = policy or default_action_policy
        self._actions: dict[str, ActionDefinition] = {}
        self._names: dict[str, str] = {}
        for action in actions:
            self.register(action)

    def list(self) -> list[ActionDefinition]:
        """List the registered actions.

        Returns:
            The definitions in registration order.
        """
        return list(self._actions.values())

    def register(self, action: ActionDefinition) -> None:
        """Add an action.

        Args:
            action: the definition.

        Raises:
            UserError: its id or an alias is taken.
        """
        for name in (action.id, *action.aliases):
            if name in self._names:
                raise UserError(f"Action id {name!r} is already registered. Use a unique id or alias.")
        self._actions[action.id] = action
        for name in (action.id, *action.aliases):
            self._names[name] = action.id

    def unregister(self, id: str) -> bool:
        """Remove an action (by id or alias) with its aliases.

        Args:
            id: the id or an alias.

        Returns:
            Whether something was removed.
        """
        canonical = self._names.get(id)
        if canonical is None:
            return False
        action = self._actions.pop(canonical)
        for name in (action.id, *action.aliases):
            self._names.pop(name, None)
        return True

    def has(self, id: str) -> bool:
        """Tell whether an id or alias is registered.

        Args:
            id: the id or alias.

        Returns:
            ``True`` if it resolves.
        """
        return id in self._names

    def resolve(self, id: str) -> ActionDefinition | None:
        """Find an action by id or alias.

        Args:
            id: the id or alias.

        Returns:
            The definition, or ``None``.
        """
        canonical = self._names.get(id)
        return self._actions[canonical] if canonical is not None else None

    def validate(
        self, proposal: ActionProposal | Mapping[str, Any], actor: Actor | Mapping[str, Any] | None = None
    ) -> ValidatedAction:
        """Gate a proposal: resolve it, validate its params, ask the policy.

        Args:
            proposal: an `ActionProposal` or ``{"id", "params"}``.
            actor: who would run it.

        Returns:
            The `ValidatedAction`; unknown actions and invalid params are ``blocked`` with a reason.
        """
        if not isinstance(proposal, ActionProposal):
            proposal = ActionProposal(str(proposal.get("id", "")), dict(proposal.get("params") or {}))
        action = self.resolve(proposal.id)
        if action is None:
            return ValidatedAction(proposal.id, proposal.params, "blocked", f"Unknown action {proposal.id!r}.")
        params = proposal.params
        if action.schema is not None:
            try:
                params = _parse_params(action.schema, params)
            except (ValidationError, ValueError, TypeError) as err:
                reason = f"Invalid params for action {action.id!r}: {err}"
                return ValidatedAction(action.id, proposal.params, "blocked", reason, action)
        result = _verdict(self.policy(ActionPolicyContext(action, params, to_actor(actor))), action.id)
        return ValidatedAction(action.id, params, result.status, result.reason, action)


@dataclass(frozen=True, slots=True)
class ParsedDirectives:
    """A model reply with its directives taken out.

    Args:
        text: the visible text.
        actions: ``!>`` action proposals, in order.
        follow_ups: ``?>`` follow-up suggestions.
        parse_errors: soft errors (e.g. bad JSON params); empty for clean replies.
    """

    text: str
    actions: list[ActionProposal]
    follow_ups: list[str]
    parse_errors: list[str]


def parse_assistant_directives(text: str, *, max_actions: int | None = None) -> ParsedDirectives:
    """Strip ``!> action.id {json params}`` and ``?> follow-up`` lines from a reply.

    Args:
        text: the model reply.
        max_actions: keep at most this many action proposals (the rest become parse errors).

    Returns:
        The `ParsedDirectives`.
    """
    kept: list[str] = []
    actions: list[ActionProposal] = []
    follow_ups: list[str] = []
    errors: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("?>"):
            if suggestion := stripped[2:].strip():
                follow_ups.append(suggestion)
            continue
        if not stripped.startswith("!>"):
            kept.append(line)
            continue
        action_id, _, raw = stripped[2:].strip().partition(" ")
        if not action_id:
            errors.append(f"Empty action directive: {stripped!r}")
            continue
        params: Any = {}
        if raw.strip():
            try:
                params = json.loads(raw)
            except json.JSONDecodeError as err:
                errors.append(f"Invalid JSON params for action {action_id!r}: {err.msg}")
                continue
        if not isinstance(params, dict):
            errors.append(f"Params for action {action_id!r} must be a JSON object, got {raw.strip()!r}")
            continue
        if max_actions is not None and len(actions) >= max_actions:
            errors.append(f"Action {action_id!r} dropped: more than {max_actions} actions proposed")
            continue
        actions.append(ActionProposal(action_id, params))
    return ParsedDirectives("\n".join(kept).strip(), actions, follow_ups, errors)


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """A named piece of context for the prompt.

    Args:
        name: the tag name.
        content: the text (anything else is rendered as JSON).
    """

    name: str
    content: Any


def render_context_blocks(blocks: Sequence[ContextBlock | Mapping[str, Any]]) -> str:
    """Render named blocks as ``<name>content</name>``, joined by newlines.

    Args:
        blocks: `ContextBlock`s or ``{"name", "content"}`` mappings.

    Returns:
        The text: one ``<name>content</name>`` line per block.
    """
    rendered: list[str] = []
    for block in blocks:
        name, content = (
            (block.name, block.content) if isinstance(block, ContextBlock) else (block["name"], block["content"])
        )
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, indent=2, default=str)
        rendered.append(f"<{name}>{text}</{name}>")
    return "\n".join(rendered)


@dataclass(frozen=True, slots=True)
class DirectiveResult:
    """A reply with its directive-proposed actions already through the registry's policy gate.

    Args:
        message: the visible text (directives stripped).
        actions: each proposal validated by the registry.
        follow_ups: suggested next prompts (``?>`` lines).
        parse_errors: soft parse errors; empty for clean replies.
    """

    message: str
    actions: list[ValidatedAction]
    follow_ups: list[str]
    parse_errors: list[str]


def validate_directives(
    text: str,
    registry: ActionRegistry,
    *,
    actor: Actor | Mapping[str, Any] | None = None,
    max_actions: int | None = 3,
) -> DirectiveResult:
    """Parse a reply's directives and validate every proposed action (the seed agent's ``respond`` step).

    Args:
        text: the model reply.
        registry: the action gate.
        actor: who would run the actions.
        max_actions: cap on proposals per reply (the seed's default is 3); extra ones become parse errors.

    Returns:
        The `DirectiveResult`.
    """
    parsed = parse_assistant_directives(text, max_actions=max_actions)
    resolved = to_actor(actor)
    return DirectiveResult(
        message=parsed.text,
        actions=[registry.validate(p, resolved) for p in parsed.actions],
        follow_ups=parsed.follow_ups,
        parse_errors=parsed.parse_errors,
    )
