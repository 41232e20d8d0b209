"""`Actor`: the authenticated subject of a request."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ai_utils.exceptions import UserError

__all__ = ["Actor", "ActorLike", "to_actor"]

# Attribute keys that may hold credentials; they never reach audit rows or events.
_SECRET_KEY = re.compile(r"secret|token|password|passwd|api[_-]?key|credential|auth|cookie|session|context", re.I)


@dataclass(frozen=True, slots=True)
class Actor:
    """Who makes a request. Populate it server-side; never trust it from the client.

    Args:
        user_id: stable user id.
        tenant_id: multi-tenant scope; audit rows are partitioned by it.
        roles: free-form roles consulted by policies (``"admin"`` opens admin actions).
        plan: plan tier, e.g. ``"free"`` or ``"pro"``.
        attributes: product-specific data (org id, region, flags).
    """

    user_id: str | None = None
    tenant_id: str | None = None
    roles: tuple[str, ...] = ()
    plan: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)

    def merged_with(self, default: Actor | None) -> Actor:
        """Fill the fields this actor leaves empty from ``default``.

        Args:
            default: the gateway's default actor.

        Returns:
            A new actor; this actor's values win.
        """
        if default is None:
            return self
        return Actor(
            user_id=self.user_id if self.user_id is not None else default.user_id,
            tenant_id=self.tenant_id if self.tenant_id is not None else default.tenant_id,
            roles=self.roles or default.roles,
            plan=self.plan if self.plan is not None else default.plan,
            attributes={**default.attributes, **self.attributes},
        )

    def to_audit(self) -> dict[str, Any]:
        """The actor as stored in audit rows and events: attributes that look like secrets are dropped.

        Returns:
            A JSON-ready dict with ``user_id``, ``tenant_id``, ``roles``, ``plan`` and ``attributes``.
        """
        return {
            "user_id": self.user_id,
            "tenant_id": self.tenant_id,
            "roles": list(self.roles),
            "plan": self.plan,
            "attributes": {k: v for k, v in self.attributes.items() if not _SECRET_KEY.search(str(k))},
        }


ActorLike: TypeAlias = "Actor | Mapping[str, Any]"

_KEYS = {
    "user_id": "user_id",
    "userId": "user_id",
    "tenant_id": "tenant_id",
    "tenantId": "tenant_id",
    "roles": "roles",
    "plan": "plan",
    "attributes": "attributes",
}


def to_actor(value: Actor | Mapping[str, Any] | None) -> Actor | None:
    """Accept an `Actor`, a mapping with its keys (snake_case or the seed's camelCase) or ``None``.

    Args:
        value: the actor in any accepted form.

    Returns:
        An `Actor`, or ``None`` for ``None``.

    Raises:
        UserError: an unknown key or a wrong type.
    """
    if value is None or isinstance(value, Actor):
        return value
    if not isinstance(value, Mapping):
        raise UserError(f"An actor must be an Actor or a mapping, got {value!r}. Pass Actor(user_id=...).")
    kwargs: dict[str, Any] = {}
    for key, item in value.items():
        if key not in _KEYS:
            raise UserError(f"Unknown actor key {key!r}. Use user_id, tenant_id, roles, plan or attributes.")
        kwargs[_KEYS[key]] = item
    roles = kwargs.get("roles") or ()
    if isinstance(roles, str) or not isinstance(roles, Sequence):
        raise UserError(f"Actor roles must be a list of strings, got {roles!r}. Pass roles=['admin'].")
    kwargs["roles"] = tuple(roles)
    kwargs["attributes"] = dict(kwargs.get("attributes") or {})
    return Actor(**kwargs)
