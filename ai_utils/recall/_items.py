"""`MemoryItem`, `MemoryScope` and `create_memory_item`: the typed memory record (seed: polpo "Typed Memory").

Pure data and validation, no store: what an item is, what makes two items exact duplicates (same scope, kind and
normalised content) and how an item is written into / read back from a `BaseStore` value.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from typing_extensions import TypedDict

from ai_utils.exceptions import UserError

__all__ = [
    "ITEM_ID",
    "MemoryItem",
    "MemoryKind",
    "MemoryProvenance",
    "MemoryScope",
    "ProvenanceSource",
    "ScopeKind",
    "create_memory_item",
    "item_from_value",
    "item_to_value",
    "normalise",
    "to_scope",
]

MemoryKind = Literal["fact", "preference", "episode", "instruction"]
ScopeKind = Literal["user", "agent", "tenant", "session"]
ProvenanceSource = Literal["explicit", "inferred", "imported"]

MEMORY_KINDS: tuple[str, ...] = get_args(MemoryKind)
SCOPE_KINDS: tuple[str, ...] = get_args(ScopeKind)
SOURCES: tuple[str, ...] = get_args(ProvenanceSource)

MAX_CONTENT_CHARS = 8_000
"""Memory items are snippets ("Prefers concise answers."), not documents: longer content is refused."""
_MAX_SUBJECT_CHARS = 256
_MAX_ACTOR_CHARS = 200
_SCHEMA = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

ITEM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""An item id (also what tools and cursors carry): matched whole, so no trailing newline gets through."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_SPACE = re.compile(r"\s+")


class MemoryProvenance(TypedDict):
    """Where an item came from: ``source`` (``"explicit"``, ``"inferred"``, ``"imported"``) and ``actor``."""

    source: ProvenanceSource
    actor: str


def _subject(value: object, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_SUBJECT_CHARS:
        raise UserError(
            f"{where} must be a non-empty string of at most {_MAX_SUBJECT_CHARS} characters, got {value!r}. "
            "Pass the host's id for the user, agent, tenant or session."
        )
    if _CONTROL.search(value) or value != value.strip():
        raise UserError(
            f"{where} {value!r} has control characters or surrounding whitespace. Pass the id exactly as the host "
            "stores it, without newlines."
        )
    return value


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Whose memory an item is: ``MemoryScope("user", "external-user-123")``.

    There is no global scope: every item belongs to one user, agent, tenant or session of the host.

    Args:
        kind: ``"user"``, ``"agent"``, ``"tenant"`` or ``"session"``.
        subject_id: the host's id of that user/agent/tenant/session (any string; emails with "." work).

    Raises:
        UserError: an unknown kind or an empty, over-long or multi-line subject id.
    """

    kind: ScopeKind
    subject_id: str

    def __post_init__(self) -> None:
        if self.kind not in SCOPE_KINDS:
            raise UserError(f"Unknown memory scope kind {self.kind!r}. Use one of {', '.join(map(repr, SCOPE_KINDS))}.")
        _subject(self.subject_id, "MemoryScope.subject_id")


def to_scope(value: object) -> MemoryScope:
    """A `MemoryScope` from itself or a mapping ``{"kind", "subject_id"}`` (the seed's ``subjectId`` too).

    Raises:
        UserError: anything else, or a mapping with other keys.
    """
    if isinstance(value, MemoryScope):
        return value
    if isinstance(value, Mapping):
        keys = {("subject_id" if k == "subjectId" else k): v for k, v in value.items()}
        if set(keys) != {"kind", "subject_id"}:
            raise UserError(
                f"A memory scope mapping needs exactly 'kind' and 'subject_id', got {sorted(value)!r}. "
                "Pass MemoryScope('user', user_id)."
            )
        return MemoryScope(keys["kind"], keys["subject_id"])
    raise UserError(f"Expected a MemoryScope, got {value!r}. Pass MemoryScope('user', user_id).")


def _provenance(value: object) -> MemoryProvenance:
    if not isinstance(value, Mapping) or set(value) != {"source", "actor"}:
        raise UserError(
            f"`provenance` must be a mapping with exactly 'source' and 'actor', got {value!r}. "
            "Pass {'source': 'explicit', 'actor': 'user'}."
        )
    source, actor = value["source"], value["actor"]
    if source not in SOURCES:
        raise UserError(f"Unknown provenance source {source!r}. Use one of {', '.join(map(repr, SOURCES))}.")
    if not isinstance(actor, str) or not actor.strip() or len(actor) > _MAX_ACTOR_CHARS or _CONTROL.search(actor):
        raise UserError(
            f"Provenance actor must be a short single-line string, got {actor!r}. Pass e.g. 'user' or 'agent'."
        )
    return {"source": source, "actor": actor}


def _content(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"Memory content must be a non-empty string, got {value!r}. Pass the text to remember.")
    if len(value) > MAX_CONTENT_CHARS:
        raise UserError(
            f"Memory content has {len(value)} characters; at most {MAX_CONTENT_CHARS} are allowed. Store a short "
            "snippet (documents belong in a vector store)."
        )
    return value


def _aware(value: object, where: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise UserError(f"{where} must be a timezone-aware datetime, got {value!r}. Use datetime.now(UTC).")
    return value


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One typed memory: a fact, preference, episode or instruction of one scope.

    Build new items with `create_memory_item` (it validates and fills ids and timestamps); a store returns
    them from `MemoryItemStore.add`, ``get``, ``search`` and ``list_page``.

    Attributes:
        id: the item's id (letters, digits, ``_``, ``-``).
        scope: whose memory it is.
        kind: ``"fact"``, ``"preference"``, ``"episode"`` or ``"instruction"``.
        content: the text.
        provenance: ``{"source": "explicit" | "inferred" | "imported", "actor": str}``.
        created_at: when it was first stored (timezone-aware).
        updated_at: when it last changed.
        expires_at: after this time no call returns it; ``None`` keeps it.
        deleted: soft-deleted by `MemoryItemStore.forget`.
    """

    id: str
    scope: MemoryScope
    kind: MemoryKind
    content: str
    provenance: MemoryProvenance
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    deleted: bool = False
    _dedupe: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not ITEM_ID.fullmatch(self.id):
            raise UserError(f"A memory item id must be 1-64 letters, digits, '_' or '-', got {self.id!r}.")
        if not isinstance(self.scope, MemoryScope):
            raise UserError(f"MemoryItem.scope must be a MemoryScope, got {self.scope!r}.")
        if self.kind not in MEMORY_KINDS:
            raise UserError(f"Unknown memory kind {self.kind!r}. Use one of {', '.join(map(repr, MEMORY_KINDS))}.")
        _content(self.content)
        object.__setattr__(self, "provenance", _provenance(self.provenance))
        if _aware(self.created_at, "created_at") < _EPOCH:
            raise UserError(
                f"created_at={self.created_at.isoformat()!r} is before 1970-01-01: list_page orders items by their "
                "creation time as a non-negative number. Pass a creation time (`now`) from 1970-01-01 UTC on."
            )
        _aware(self.updated_at, "updated_at")
        if self.expires_at is not None:
            _aware(self.expires_at, "expires_at")
        object.__setattr__(self, "_dedupe", dedupe_key(self.scope, self.kind, self.content))

    @property
    def dedupe_key(self) -> str:
        """The exact-duplicate identity: a digest of the scope, the kind and the normalised content."""
        return self._dedupe

    def expired(self, now: datetime | None = None) -> bool:
        """Whether ``expires_at`` has passed (at ``now``, default the current time)."""
        return self.expires_at is not None and self.expires_at <= (now or datetime.now(UTC))


def normalise(text: str) -> str:
    """The text exact duplicates share: NFKC, case-folded, whitespace collapsed and trimmed."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def dedupe_key(scope: MemoryScope, kind: str, content: str) -> str:
    """A digest of scope, kind and normalised content (the id of a new item, so duplicates share a key)."""
    raw = "\x00".join((scope.kind, scope.subject_id, kind, normalise(content)))
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def create_memory_item(
    *,
    scope: MemoryScope | Mapping[str, str],
    kind: MemoryKind,
    content: str,
    provenance: MemoryProvenance | Mapping[str, str],
    expires_at: datetime | None = None,
    id: str | None = None,
    now: datetime | None = None,
) -> MemoryItem:
    """A validated new memory item (seed: ``createMemoryItem``).

    Example:
        ```python
        item = create_memory_item(
            scope=MemoryScope("user", "external-user-123"),
            kind="preference",
            content="Prefers concise answers.",
            provenance={"source": "explicit", "actor": "user"},
        )
        ```

    Args:
        scope: whose memory (`MemoryScope` or ``{"kind", "subject_id"}``).
        kind: ``"fact"``, ``"preference"``, ``"episode"`` or ``"instruction"``.
        content: the text (at most 8,000 characters).
        provenance: ``{"source": "explicit" | "inferred" | "imported", "actor": str}``.
        expires_at: when the item stops being returned (timezone-aware, in the future).
        id: the item id; by default derived from scope, kind and normalised content, so an exact duplicate
            gets the same id (and is stored once).
        now: the creation time (default: the current UTC time).

    Returns:
        The item, ``created_at == updated_at == now``.

    Raises:
        UserError: empty or over-long content, an unknown kind or source, a bad scope or id, a ``now`` before
            1970-01-01 UTC, or an ``expires_at`` that is not in the future.
    """
    the_scope = to_scope(scope)
    if kind not in MEMORY_KINDS:
        raise UserError(f"Unknown memory kind {kind!r}. Use one of {', '.join(map(repr, MEMORY_KINDS))}.")
    text = _content(content)
    created = _aware(now, "now") if now is not None else datetime.now(UTC)
    if expires_at is not None and _aware(expires_at, "expires_at") <= created:
        raise UserError(
            f"expires_at={expires_at.isoformat()!r} is not after the creation time {created.isoformat()!r}: "
            "the item would be expired on creation. Pass a future time or None."
        )
    return MemoryItem(
        id=id if id is not None else "m" + dedupe_key(the_scope, kind, text),
        scope=the_scope,
        kind=kind,
        content=text,
        provenance=_provenance(provenance),
        created_at=created,
        updated_at=created,
        expires_at=expires_at,
    )


def new_item_id() -> str:
    """A random item id (for a new item whose derived id is taken by an item that changed since)."""
    return "m" + uuid.uuid4().hex


def micros(moment: datetime) -> int:
    """Microseconds since the epoch: the keyset position of ``created_at``."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def item_to_value(item: MemoryItem, *, terms: Mapping[str, int], length: int, embedding: str | None) -> dict[str, Any]:
    """The `BaseStore` value of ``item``: its fields plus what search and paging filter on.

    ``created_key`` is the zero-padded microsecond time (compared as text by the SQL stores and as a number by
    `InMemoryStore`, so it must sort the same both ways), ``terms``/``length`` the lexical index, ``embedding``
    the identity of the vector the store indexed for ``content`` (``None``: not indexed).
    """
    return {
        "schema": _SCHEMA,
        "id": item.id,
        "scope": {"kind": item.scope.kind, "subject_id": item.scope.subject_id},
        "kind": item.kind,
        "content": item.content,
        "provenance": dict(item.provenance),
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
        "expires_at": item.expires_at.isoformat() if item.expires_at is not None else None,
        "deleted": item.deleted,
        "created_key": f"{micros(item.created_at):020d}",
        "dedupe": item.dedupe_key,
        "terms": dict(terms),
        "length": length,
        "embedding": embedding,
    }


class StoredValueError(UserError):
    """A stored value that is not a memory item of this version (carries ``.namespace`` and ``.key``)."""

    def __init__(self, message: str, *, namespace: tuple[str, ...], key: str) -> None:
        super().__init__(message)
        self.namespace = namespace
        self.key = key


def item_from_value(value: Mapping[str, Any], *, namespace: tuple[str, ...], key: str) -> MemoryItem:
    """Parse a stored value back into a `MemoryItem`.

    Raises:
        StoredValueError: the value is not a memory item this version wrote.
    """
    try:
        if value.get("schema") != _SCHEMA or value.get("id") != key:
            raise ValueError("schema or id mismatch")
        expires = value["expires_at"]
        return MemoryItem(
            id=value["id"],
            scope=to_scope(value["scope"]),
            kind=value["kind"],
            content=value["content"],
            provenance=value["provenance"],
            created_at=datetime.fromisoformat(value["created_at"]),
            updated_at=datetime.fromisoformat(value["updated_at"]),
            expires_at=datetime.fromisoformat(expires) if expires is not None else None,
            deleted=bool(value["deleted"]),
        )
    except (KeyError, TypeError, ValueError, UserError) as error:
        raise StoredValueError(
            f"The value stored at namespace {namespace!r}, key {key!r} is not a memory item ({error}). "
            "Keep memory namespaces for MemoryItemStore only.",
            namespace=namespace,
            key=key,
        ) from None
