"""Action definitions and the registry that gates a proposed action through its policy."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_args

from pydantic import BaseModel, ValidationError

from ai_utils.exceptions import UserError
from ai_utils.gateway.actor import Actor, to_actor

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
    action = context.action
    refused = _tier_refusal(action, context.actor)
    if refused is not None:
        return ActionPolicyResult("blocked", refused)
    if action.risk == "restricted":
        return ActionPolicyResult("blocked", f"Action {action.id!r} is restricted; a custom policy must allow it.")
    if action.risk == "confirm":
        return ActionPolicyResult("requires_confirmation", f"Action {action.id!r} needs confirmation before it runs.")
    return ActionPolicyResult("allowed")


def _tier_refusal(action: ActionDefinition, actor: Actor | None) -> str | None:
    """Why ``actor`` is below the action's availability tier, or ``None`` when it is not."""
    is_admin = actor is not None and "admin" in actor.roles
    if action.availability == "authenticated" and (actor is None or not actor.user_id):
        return f"Action {action.id!r} needs a signed-in user."
    if action.availability == "pro" and not (is_admin or (actor is not None and actor.plan == "pro")):
        return f"Action {action.id!r} needs the pro plan."
    if action.availability == "admin" and not is_admin:
        return f"Action {action.id!r} is for admins only."
    return None


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

    def available(self, actor: Actor | Mapping[str, Any] | None = None) -> builtins.list[ActionDefinition]:
        """The actions ``actor`` may propose: those whose availability tier the actor meets.

        With the default policy a ``restricted`` action is left out too (that policy always blocks it); a custom
        policy may open it, so it is listed then. `validate` stays the gate for each proposal.

        Args:
            actor: who would run the actions.

        Returns:
            The definitions in registration order.
        """
        resolved = to_actor(actor)
        default = self.policy is default_action_policy
        return [
            action
            for action in self._actions.values()
            if _tier_refusal(action, resolved) is None and not (default and action.risk == "restricted")
        ]

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
