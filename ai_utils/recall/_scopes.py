"""Namespaces and access: which `BaseStore` namespace holds a scope, and who may touch it.

A scope's items live at ``(<namespace>, <scope kind>, <encoded subject id>, "items")``. The subject id is encoded
as an opaque lowercase base32 label, so any id works (emails with ".", ids with "_" or "%") and no label can carry
a separator or a ``LIKE``/``GLOB`` wildcard into a SQL store's prefix match; the closing ``"items"`` label keeps
one subject's namespace from being a text prefix of another's (``john`` / ``johnny``). Every item a store returns
is still checked against the exact namespace asked for (`owned`): our layer never trusts a backend's prefix
matching (see CVE-2026-71433, langgraph#8300).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ai_utils.exceptions import UserError
from ai_utils.gateway.actor import Actor, to_actor
from ai_utils.recall._items import MemoryScope, to_scope

__all__ = [
    "AGENT_ATTRIBUTE",
    "SESSION_ATTRIBUTE",
    "actor_scopes",
    "can_access_memory_scope",
    "check_namespace",
    "item_namespace",
    "meta_namespace",
    "scope_list",
]

_ROOT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
AGENT_ATTRIBUTE = "agent_id"
"""`Actor.attributes` key of the agent the actor may use the memory of (the host sets it, never the model)."""
SESSION_ATTRIBUTE = "session_id"
"""`Actor.attributes` key of the session whose memory the actor may use."""


def check_namespace(namespace: object) -> str:
    """The host-owned root label, checked whole.

    Raises:
        UserError: not 1-64 letters, digits, ``_`` or ``-`` starting with a letter or digit, or ``"langgraph"``.
    """
    if not isinstance(namespace, str) or not _ROOT.fullmatch(namespace) or namespace == "langgraph":
        raise UserError(
            f"`namespace` must be 1-64 letters, digits, '_' or '-' (not 'langgraph'), got {namespace!r}. "
            "Pass your application's or project's name, e.g. namespace='support-bot'."
        )
    return namespace


def _label(subject_id: str) -> str:
    return "s" + base64.b32encode(subject_id.encode()).decode().rstrip("=").lower()


def item_namespace(root: str, scope: MemoryScope) -> tuple[str, ...]:
    """The namespace of ``scope``'s items under ``root``."""
    return (root, scope.kind, _label(scope.subject_id), "items")


def calls_namespace(root: str, scope: MemoryScope) -> tuple[str, ...]:
    """The namespace of the memory tools' call receipts for writes into ``scope``."""
    return (root, scope.kind, _label(scope.subject_id), "calls")


def meta_namespace(root: str) -> tuple[str, ...]:
    """The namespace of ``root``'s own records (the embedding identity)."""
    return (root, "meta")


def scope_list(scopes: object) -> list[MemoryScope]:
    """``scopes`` as a non-empty list of distinct `MemoryScope` s (there is no global default).

    Raises:
        UserError: none given, a bare scope, or an entry that is not a scope.
    """
    if isinstance(scopes, (MemoryScope, Mapping, str)) or not isinstance(scopes, Sequence):
        raise UserError(
            f"`scopes` must be a list of MemoryScope, got {scopes!r}. Name every scope the call may read, "
            "e.g. scopes=[MemoryScope('user', user_id)]."
        )
    if not scopes:
        raise UserError(
            "`scopes` is empty: a memory call reads only the scopes it names, and there is no global default. "
            "Pass scopes=[MemoryScope('user', user_id)]."
        )
    out: list[MemoryScope] = []
    for scope in scopes:
        the_scope = to_scope(scope)
        if the_scope not in out:
            out.append(the_scope)
    return out


def _attribute(actor: Actor, name: str) -> str | None:
    value = actor.attributes.get(name)
    return value if isinstance(value, str) and value else None


def can_access_memory_scope(actor: Actor | Mapping[str, Any] | None, scope: MemoryScope | Mapping[str, str]) -> bool:
    """Whether ``actor`` may read and write ``scope`` (seed: ``canAccessMemoryScope``).

    The host puts only the dimensions the actor is authorised for on the `Actor`: a user scope needs
    ``actor.user_id == subject_id``, a tenant scope ``actor.tenant_id``, an agent scope
    ``actor.attributes["agent_id"]``, a session scope ``actor.attributes["session_id"]``. Roles never widen
    access and a missing dimension never matches: no actor, no access.

    Example:
        ```python
        can_access_memory_scope(Actor(user_id="u1"), MemoryScope("user", "u1"))  # True
        can_access_memory_scope(Actor(user_id="u1"), MemoryScope("user", "u2"))  # False
        ```

    Args:
        actor: an `Actor`, a mapping with its keys, or ``None``.
        scope: the scope asked for.

    Returns:
        True only when the matching dimension equals the scope's subject id exactly.
    """
    the_actor = to_actor(actor)
    the_scope = to_scope(scope)
    if the_actor is None:
        return False
    granted = {
        "user": the_actor.user_id,
        "tenant": the_actor.tenant_id,
        "agent": _attribute(the_actor, AGENT_ATTRIBUTE),
        "session": _attribute(the_actor, SESSION_ATTRIBUTE),
    }[the_scope.kind]
    return granted is not None and granted == the_scope.subject_id


def actor_scopes(actor: Actor) -> list[MemoryScope]:
    """Every scope ``actor`` carries a dimension for: user, agent, tenant, session (in that order)."""
    dimensions = (
        ("user", actor.user_id),
        ("agent", _attribute(actor, AGENT_ATTRIBUTE)),
        ("tenant", actor.tenant_id),
        ("session", _attribute(actor, SESSION_ATTRIBUTE)),
    )
    return [MemoryScope(kind, subject) for kind, subject in dimensions if subject]  # type: ignore[arg-type]


def check_access(actor: Actor | Mapping[str, Any] | None, scopes: Sequence[MemoryScope]) -> None:
    """Raise `UserError` naming the first scope ``actor`` may not access."""
    for scope in scopes:
        if not can_access_memory_scope(actor, scope):
            raise UserError(
                f"The actor may not access memory scope {scope.kind!r} of subject {scope.subject_id!r}. "
                "Pass only scopes the actor's user_id / tenant_id / attributes authorise."
            )
