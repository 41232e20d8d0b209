"""Permission rules of a loop: `permission(...)` and its JSON form (the check itself is in ``_permissions``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ai_utils.exceptions import LoopDefinitionError
from ai_utils.loops._steps import check_name, fields_of

__all__ = ["Effect", "Permission", "permission", "permission_from_json"]

Effect = Literal["allow", "deny", "approval"]


@dataclass(frozen=True, slots=True)
class Permission:
    """One permission rule over tool calls (see `permission`)."""

    id: str
    resource: Literal["tool"]
    action: Literal["call"]
    effect: Effect
    match: dict[str, tuple[str, ...]]
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form of the rule."""
        return {
            "id": self.id,
            "resource": self.resource,
            "action": self.action,
            "effect": self.effect,
            "match": {k: list(v) for k, v in self.match.items()},
            "message": self.message,
        }


_MATCH_KEYS = ("tool", "step")
_MAX_NAMES = 256
_FIELDS = frozenset({"id", "resource", "action", "effect", "match", "message"})


def permission(
    id: str,
    *,
    resource: Literal["tool"],
    action: Literal["call"],
    effect: Effect,
    match: Mapping[str, str | Sequence[str]],
    message: str | None = None,
) -> Permission:
    """A rule for tool calls, checked for every call by agent steps and tool steps.

    Rules are tried by specificity: a tool named exactly beats a glob pattern (``"refund_*"``), which beats
    a rule without ``tool`` (or ``"*"``); a ``step`` key adds to it. Among the matching rules of the most
    specific level the first one declared wins, except that a ``deny`` there beats ``allow`` and
    ``approval``. No matching rule → deny.

    Args:
        id: the rule id (reported in ``permission.result`` events).
        resource: ``"tool"``.
        action: ``"call"``.
        effect: ``"allow"``, ``"deny"`` or ``"approval"`` (a human approves each call first).
        match: ``{"tool": name | [names] | glob, "step": key | [keys]}`` (both optional).
        message: the question shown with an approval, or the reason given with a denial.

    Raises:
        LoopDefinitionError: a malformed rule.
    """
    check_name(id, what="permission() id")
    where = f"permission({id!r})"
    if resource != "tool":
        raise LoopDefinitionError(f"{where}: resource={repr(resource)[:80]} is not supported; use resource='tool'.")
    if action != "call":
        raise LoopDefinitionError(f"{where}: action={repr(action)[:80]} is not supported; use action='call'.")
    if effect not in ("allow", "deny", "approval"):
        raise LoopDefinitionError(f"{where}: effect={repr(effect)[:80]}; use 'allow', 'deny' or 'approval'.")
    if not isinstance(match, Mapping) or set(match) - set(_MATCH_KEYS):
        raise LoopDefinitionError(f"{where}: match={repr(match)[:80]}; use {{'tool': ..., 'step': ...}}.")
    clean: dict[str, tuple[str, ...]] = {}
    for key, value in match.items():
        if isinstance(value, str):
            values: tuple[object, ...] = (value,)
        elif isinstance(value, list | tuple) and len(value) <= _MAX_NAMES:
            values = tuple(value)
        else:
            values = ()
        if not values:
            raise LoopDefinitionError(
                f"{where}: match[{key!r}] must be a name or a list of at most {_MAX_NAMES} names, "
                f"got {repr(value)[:80]}."
            )
        clean[key] = tuple(check_name(v, what=f"{where}: match[{key!r}] entry") for v in values)
    if message is not None and (not isinstance(message, str) or len(message) > 4096):
        raise LoopDefinitionError(f"{where}: message must be a str of at most 4096 characters.")
    return Permission(id, resource, action, effect, clean, message)


def permission_from_json(data: object, index: int = 0) -> Permission:
    """Rebuild a rule from its JSON form (every field type-checked)."""
    fields = fields_of(data, where=f"permissions[{index}]", allowed=_FIELDS)
    match = fields.get("match")
    return permission(
        fields.get("id"),  # type: ignore[arg-type]
        resource=fields.get("resource"),  # type: ignore[arg-type]
        action=fields.get("action"),  # type: ignore[arg-type]
        effect=fields.get("effect"),  # type: ignore[arg-type]
        match={} if match is None else match,
        message=fields.get("message"),
    )
