"""`MemoryItemStore`: typed memory items on any LangGraph `BaseStore` (seed: polpo "Typed Memory").

It wraps the store rather than subclassing it and keeps to the store's own namespaces, search and index: items
are values in ``(<namespace>, <scope kind>, <subject>, "items")`` (`ai_utils.recall._scopes`), the vector index
is the store's (``index=`` of `InMemoryStore` / `PostgresStore` / `SqliteStore`, on the ``content`` field), and
each exact-duplicate identity has a one-line marker under ``(..., "dedupe")`` so "stored once" is a key lookup,
not a scan. Every method is a generator body yielding `Step` s (one ``store.batch`` / ``abatch`` each), made
into the sync method and its async twin by `twins`: the logic exists once.

Search fuses two rankings by rank (`ai_utils.recall._ranking`): BM25 over the items of the named scopes
(`BaseStore` has no lexical search, so items carry their terms) and the store's semantic ranking. With an
`InMemoryStore` one query does both: its semantic search returns every item of a namespace (items without a
vector unscored), so the lexical pass reads the same rows. SQL stores return only items that have a vector from
a semantic query, so there the lexical pass is a second, filtered read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

from ai_utils.exceptions import UserError
from ai_utils.gateway.actor import Actor
from ai_utils.memory._methods import Flow, Step, twins
from ai_utils.recall._cursor import Position, decode_cursor, encode_cursor, filter_digest
from ai_utils.recall._identity import SemanticMode, resolve_identity
from ai_utils.recall._items import (
    ITEM_ID,
    MemoryItem,
    MemoryKind,
    MemoryScope,
    item_from_value,
    item_to_value,
    micros,
    new_item_id,
    to_scope,
)
from ai_utils.recall._ranking import bm25_ranking, fuse, item_tokens, query_terms, terms_of
from ai_utils.recall._scopes import check_access, check_namespace, item_namespace, meta_namespace, scope_list

__all__ = ["MemoryItemStore"]

logger = logging.getLogger("ai_utils.recall")

_MAX_LIMIT = 1_000
_MAX_QUERY_CHARS = 4_000
_META_KEY = "embedding"
_INDEX_FIELDS: Final = ["content"]


class _Unset:
    pass


_UNSET: Final = _Unset()


def _positive(value: object, name: str, *, maximum: int = _MAX_LIMIT) -> int:
    if type(value) is not int or not 1 <= value <= maximum:
        raise UserError(f"`{name}` must be an int from 1 to {maximum}, got {value!r}.")
    return value


def _dedupe_namespace(items: tuple[str, ...]) -> tuple[str, ...]:
    return (*items[:-1], "dedupe")


def _live(row: Item | None, now: datetime) -> bool:
    if row is None or row.value.get("deleted") is not False:
        return False
    expires = row.value.get("expires_at")
    return expires is None or datetime.fromisoformat(expires) > now


_Key = tuple[tuple[str, ...], str]


def _lexical_candidates(
    found_lists: Sequence[Sequence[SearchItem]], query: Sequence[str], now: datetime
) -> tuple[list[tuple[_Key, dict[str, int], int]], int, int, dict[_Key, SearchItem]]:
    """One pass over every row read: the live rows holding a query term (with their hits) and corpus totals.

    Written as one loop on purpose: it runs once per item of the searched scopes on every search.
    """
    matched: list[tuple[_Key, dict[str, int], int]] = []
    keep: dict[_Key, SearchItem] = {}
    total = length_sum = 0
    for found in found_lists:
        for row in found:
            value = row.value
            if value.get("deleted") is not False:
                continue
            expires = value.get("expires_at")
            if expires is not None and datetime.fromisoformat(expires) <= now:
                continue
            length = value.get("length") or 0
            total += 1
            length_sum += length
            terms = value.get("terms")
            if not terms:
                continue
            hits: dict[str, int] | None = None
            for term in query:
                if count := terms.get(term):
                    if hits is None:
                        hits = {}
                    hits[term] = count
            if hits:
                key = (row.namespace, row.key)
                matched.append((key, hits, length))
                keep[key] = row
    return matched, total, length_sum, keep


def _semantic_candidates(
    found_lists: Sequence[Sequence[SearchItem]], identity: str | None, now: datetime, candidates: int
) -> list[tuple[_Key, SearchItem]]:
    """The best ``candidates`` live rows with a vector of ``identity``; each list comes best first from the store."""
    scored: list[tuple[float, _Key, SearchItem]] = []
    for found in found_lists:
        taken = 0
        for row in found:
            if taken == candidates:
                break
            if row.score is None or row.value.get("embedding") != identity or not _live(row, now):
                continue
            scored.append((float(row.score), (row.namespace, row.key), row))
            taken += 1
    # Lists of several scopes come from one index, so their scores compare; merge them by score.
    scored.sort(key=lambda entry: -entry[0])
    return [(key, row) for _, key, row in scored[:candidates]]


class MemoryItemStore:
    """Typed long-term memory on a LangGraph `BaseStore` (SPEC §22).

    Example:
        ```python
        store = InMemoryStore(index={"dims": 384, "embed": get_embeddings("local"), "fields": ["content"]})
        memory = MemoryItemStore(store, namespace="support-bot")
        alice = MemoryScope("user", "alice@example.com")
        memory.add(create_memory_item(scope=alice, kind="preference", content="Prefers concise answers.",
                                      provenance={"source": "explicit", "actor": "user"}))
        memory.search("how should answers look?", scopes=[alice])  # [MemoryItem(... 'Prefers concise answers.')]
        ```

    Every call names the scopes it touches; there is no global default, and no call reads another namespace
    or a scope it did not name. Pass ``actor=`` to also check each scope with `can_access_memory_scope`.

    Args:
        store: any `BaseStore` (`InMemoryStore`, `PostgresStore`, `SqliteStore`, ...). Semantic search uses its
            vector index (``index={"dims", "embed", "fields": ["content"]}``); without one, search is lexical.
        namespace: the host-owned root label (your application or project), 1-64 letters, digits, ``_``, ``-``.
        embeddings: optional; the model of the store's index, checked to be the same (provider, model,
            dimensions). The store embeds; vectors of another identity are never compared.
        semantic: ``"auto"`` (default: semantic when the store has an index; if embedding fails, lexical),
            ``"strict"`` (embedding failures raise) or ``"off"`` (lexical only).

    Raises:
        UserError: a bad namespace or mode, ``embeddings`` that differ from the store's index (or with no index),
            ``"strict"`` without an index.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        namespace: str,
        embeddings: Embeddings | None = None,
        semantic: SemanticMode = "auto",
    ) -> None:
        if not isinstance(store, BaseStore):
            raise UserError(
                f"`store` must be a LangGraph BaseStore (InMemoryStore, PostgresStore, SqliteStore), got {store!r}."
            )
        self.store = store
        self.namespace = check_namespace(namespace)
        self.semantic: SemanticMode = semantic
        self._identity = resolve_identity(store, embeddings, semantic)
        # An InMemoryStore's semantic search returns every item (those without a vector unscored): one read serves
        # both rankings. SQL stores join on their vector table, so they need a lexical read of their own.
        self._single_pass = isinstance(store, InMemoryStore)
        self._page = 100_000 if self._single_pass else 1_000
        self._meta_known = False
        # SqliteStore has no async methods (its abatch raises); its calls run in a worker thread instead.
        self._sync_only = type(store).__name__ == "SqliteStore" and type(store).__module__.startswith("langgraph.")

    @property
    def embedding_identity(self) -> str | None:
        """``"<provider>|<model>|<dimensions>"`` of the vectors semantic search uses; ``None`` when lexical only."""
        return self._identity

    # --- pieces --------------------------------------------------------------------------------------------

    def _batch(self, ops: Sequence[Op]) -> Step[list[Any]]:
        return Step(self.store.batch, self._abatch, (list(ops),))

    async def _abatch(self, ops: list[Op]) -> list[Any]:
        if self._sync_only:
            return await asyncio.to_thread(self.store.batch, ops)
        return await self.store.abatch(ops)

    def _check_identity(self) -> Flow[None]:
        """Refuse a namespace whose vectors were made by another embedding model (once per instance)."""
        if self._identity is None or self._meta_known:
            return
        (meta,) = yield self._batch([GetOp(meta_namespace(self.namespace), _META_KEY)])
        if meta is None:
            return
        stored = meta.value.get("identity")
        if stored != self._identity:
            raise UserError(
                f"Memory namespace {self.namespace!r} holds vectors made by {stored!r}, but this store embeds with "
                f"{self._identity!r}; vectors of different models are never compared. Use the original model, "
                "another namespace, or semantic='off'."
            )
        self._meta_known = True

    def _record_identity(self) -> Flow[None]:
        if self._identity is None or self._meta_known:
            return
        provider, model, dims = self._identity.split("|")
        value = {"identity": self._identity, "provider": provider, "model": model, "dimensions": dims}
        yield self._batch([PutOp(meta_namespace(self.namespace), _META_KEY, value, index=False)])
        self._meta_known = True

    def _parse(self, row: Item, namespace: tuple[str, ...]) -> MemoryItem:
        return item_from_value(row.value, namespace=namespace, key=row.key)

    def _write(self, namespace: tuple[str, ...], item: MemoryItem, extra: Sequence[Op]) -> Flow[MemoryItem]:
        """Put ``item`` (indexed when semantic) and ``extra``; under "auto" a failing embedder stores it unindexed."""
        terms, length = terms_of(item.content)
        indexed = self._identity is not None and not item.deleted

        def ops(embedding: str | None) -> list[Op]:
            value = item_to_value(item, terms=terms, length=length, embedding=embedding)
            return [PutOp(namespace, item.id, value, index=_INDEX_FIELDS if embedding else False), *extra]

        try:
            yield self._batch(ops(self._identity if indexed else None))
        except Exception as error:
            if not indexed or self.semantic == "strict":
                raise
            logger.warning(
                "Embedding memory item %s failed (%s); stored without a vector (lexical search only). "
                "Use semantic='strict' to raise instead.",
                item.id,
                type(error).__name__,
            )
            yield self._batch(ops(None))
            return item
        if indexed:
            yield from self._record_identity()
        return item

    def _checked(self, scopes: Sequence[MemoryScope], actor: Actor | Mapping[str, Any] | None) -> None:
        if actor is not None:
            check_access(actor, scopes)

    def _current(self, scope: MemoryScope, item_id: object) -> Flow[tuple[tuple[str, ...], Item | None]]:
        if not isinstance(item_id, str) or not ITEM_ID.fullmatch(item_id):
            raise UserError(f"A memory item id must be 1-64 letters, digits, '_' or '-', got {item_id!r}.")
        namespace = item_namespace(self.namespace, scope)
        (row,) = yield self._batch([GetOp(namespace, item_id)])
        if row is not None and (row.namespace != namespace or row.value.get("scope", {}).get("kind") != scope.kind):
            row = None
        return namespace, row

    # --- add / get / update / forget ---------------------------------------------------------------------

    def _add(self, item: MemoryItem, *, actor: Actor | Mapping[str, Any] | None = None) -> Flow[MemoryItem]:
        """Store a new item; an exact duplicate (same scope, kind, normalised content) is stored once.

        Args:
            item: from `create_memory_item` (not deleted, not expired).
            actor: when given, the item's scope is checked with `can_access_memory_scope`.

        Returns:
            The stored item: ``item``, or the live item it duplicates.

        Raises:
            UserError: not a `MemoryItem`, deleted or expired, a custom id in use by another item, or a scope the
                actor may not access.
        """
        if not isinstance(item, MemoryItem):
            raise UserError(f"add() takes a MemoryItem, got {item!r}. Build one with create_memory_item(...).")
        now = datetime.now(UTC)
        if item.deleted or item.expired(now):
            raise UserError(f"Memory item {item.id!r} is deleted or expired; add only live items.")
        self._checked([item.scope], actor)
        yield from self._check_identity()
        namespace = item_namespace(self.namespace, item.scope)
        dedupe_ns = _dedupe_namespace(namespace)
        at_id, marker = yield self._batch([GetOp(namespace, item.id), GetOp(dedupe_ns, item.dedupe_key)])
        if marker is not None and isinstance(twin_id := marker.value.get("id"), str) and ITEM_ID.fullmatch(twin_id):
            twin = at_id if twin_id == item.id else (yield self._batch([GetOp(namespace, twin_id)]))[0]
            if _live(twin, now) and twin.value.get("dedupe") == item.dedupe_key:
                return self._parse(twin, namespace)
        # Any stored row keeps its id, a forgotten or expired one too: reusing the id would overwrite the soft-deleted
        # record and make `get(old id)` answer with the new item.
        if at_id is not None:
            if item.id != "m" + item.dedupe_key:
                raise UserError(
                    f"Memory item id {item.id!r} is in use by another item of this scope (forgotten and expired "
                    "items keep their ids). Leave `id` out of create_memory_item (ids are derived from the content) "
                    "or pick a new one."
                )
            item = dataclasses.replace(item, id=new_item_id())
        marker_op = PutOp(dedupe_ns, item.dedupe_key, {"id": item.id}, index=False)
        return (yield from self._write(namespace, item, [marker_op]))

    add, aadd = twins(_add, "add")

    def _get(
        self, scope: MemoryScope, item_id: str, *, actor: Actor | Mapping[str, Any] | None = None
    ) -> Flow[MemoryItem | None]:
        """The live item ``item_id`` of ``scope``, or ``None`` (missing, forgotten, expired or another scope's).

        Raises:
            UserError: a malformed id or scope, or a scope the actor may not access.
        """
        the_scope = to_scope(scope)
        self._checked([the_scope], actor)
        namespace, row = yield from self._current(the_scope, item_id)
        if row is None or not _live(row, datetime.now(UTC)):
            return None
        item = self._parse(row, namespace)
        return item if item.scope == the_scope else None

    get, aget = twins(_get, "get")

    def _update(
        self,
        scope: MemoryScope,
        item_id: str,
        *,
        content: str | None = None,
        kind: MemoryKind | None = None,
        expires_at: datetime | None | _Unset = _UNSET,
        actor: Actor | Mapping[str, Any] | None = None,
    ) -> Flow[MemoryItem]:
        """Change a live item's content, kind or expiry (its vector is rebuilt with it).

        Returns:
            The updated item.

        Raises:
            UserError: no live item ``item_id`` in ``scope``, new content that duplicates another item, bad
                values, or a scope the actor may not access.
        """
        the_scope = to_scope(scope)
        self._checked([the_scope], actor)
        yield from self._check_identity()
        namespace, row = yield from self._current(the_scope, item_id)
        now = datetime.now(UTC)
        if row is None or not _live(row, now):
            raise UserError(f"No memory item {item_id!r} in scope {the_scope.kind!r}. List or search for its id first.")
        old = self._parse(row, namespace)
        new = dataclasses.replace(
            old,
            content=old.content if content is None else content,
            kind=old.kind if kind is None else kind,
            expires_at=old.expires_at if isinstance(expires_at, _Unset) else expires_at,
            updated_at=now,
        )
        if new.expired(now):
            raise UserError(f"expires_at={new.expires_at!r} is not in the future; use forget() to remove an item.")
        dedupe_ns = _dedupe_namespace(namespace)
        extra: list[Op] = []
        if new.dedupe_key != old.dedupe_key:
            (marker,) = yield self._batch([GetOp(dedupe_ns, new.dedupe_key)])
            twin_id = marker.value.get("id") if marker is not None else None
            if isinstance(twin_id, str) and ITEM_ID.fullmatch(twin_id) and twin_id != old.id:
                (twin,) = yield self._batch([GetOp(namespace, twin_id)])
                if _live(twin, now) and twin.value.get("dedupe") == new.dedupe_key:
                    raise UserError(f"Memory item {twin_id!r} of this scope already says that; forget one of them.")
            extra = [
                PutOp(dedupe_ns, old.dedupe_key, None),
                PutOp(dedupe_ns, new.dedupe_key, {"id": new.id}, index=False),
            ]
        return (yield from self._write(namespace, new, extra))

    update, aupdate = twins(_update, "update")

    def _forget(
        self, scope: MemoryScope, item_id: str, *, actor: Actor | Mapping[str, Any] | None = None
    ) -> Flow[bool]:
        """Soft-delete a live item: no call returns it again (an exact duplicate added later is stored anew).

        Returns:
            True when a live item was forgotten, False when there was none.

        Raises:
            UserError: a malformed id or scope, or a scope the actor may not access.
        """
        the_scope = to_scope(scope)
        self._checked([the_scope], actor)
        namespace, row = yield from self._current(the_scope, item_id)
        now = datetime.now(UTC)
        if row is None or not _live(row, now):
            return False
        item = dataclasses.replace(self._parse(row, namespace), deleted=True, updated_at=now)
        drop_marker = PutOp(_dedupe_namespace(namespace), item.dedupe_key, None)
        yield from self._write(namespace, item, [drop_marker])
        return True

    forget, aforget = twins(_forget, "forget")

    # --- reading many --------------------------------------------------------------------------------------

    def _scan(
        self, namespaces: Sequence[tuple[str, ...]], query: str | None, filter: dict[str, Any] | None
    ) -> Flow[list[list[SearchItem]]]:
        """Every row of each namespace (paged by the store's offset), kept only if it is in that exact namespace."""
        rows: list[list[SearchItem]] = [[] for _ in namespaces]
        offsets = [0] * len(namespaces)
        pending = list(range(len(namespaces)))
        while pending:
            ops = [
                SearchOp(namespaces[i], filter=filter, limit=self._page, offset=offsets[i], query=query)
                for i in pending
            ]
            results = yield self._batch(ops)
            following = []
            for i, found in zip(pending, results, strict=True):
                rows[i].extend(r for r in found if r.namespace == namespaces[i])
                if len(found) == self._page:
                    offsets[i] += self._page
                    following.append(i)
            pending = following
        return rows

    def _list_page(
        self,
        scope: MemoryScope,
        *,
        cursor: str | None = None,
        limit: int = 50,
        actor: Actor | Mapping[str, Any] | None = None,
    ) -> Flow[tuple[list[MemoryItem], str | None]]:
        """One page of a scope's live items in keyset order ``(created_at, id)``.

        Example:
            ```python
            items, cursor = memory.list_page(scope)
            while cursor is not None:
                more, cursor = memory.list_page(scope, cursor=cursor)
            ```

        Args:
            scope: the scope to list.
            cursor: the previous page's ``next_cursor`` (opaque; bound to this namespace and scope).
            limit: items per page, 1-1000.
            actor: when given, the scope is checked with `can_access_memory_scope`.

        Returns:
            ``(items, next_cursor)``; ``next_cursor`` is ``None`` on the last page.

        Raises:
            UserError: a cursor made for another namespace or scope, or damaged; a bad limit; a scope the actor
                may not access.
        """
        the_scope = to_scope(scope)
        _positive(limit, "limit")
        self._checked([the_scope], actor)
        digest = filter_digest(self.namespace, the_scope)
        after = decode_cursor(cursor, digest) if cursor is not None else None
        namespace = item_namespace(self.namespace, the_scope)
        query_filter: dict[str, Any] = {"deleted": False}
        if after is not None:
            # Only items at or after the cursor's time are read; equal times are ordered by id below.
            query_filter["created_key"] = {"$gte": f"{after.created:020d}"}
        (rows,) = yield from self._scan([namespace], None, query_filter)
        now = datetime.now(UTC)
        keyed = []
        for row in rows:
            if not _live(row, now):
                continue
            item = self._parse(row, namespace)
            position = (micros(item.created_at), item.id)
            if item.scope == the_scope and (after is None or position > (after.created, after.id)):
                keyed.append((position, item))
        keyed.sort(key=lambda pair: pair[0])
        page = keyed[:limit]
        more = len(keyed) > limit
        next_cursor = encode_cursor(Position(*page[-1][0]), digest) if more and page else None
        return [item for _, item in page], next_cursor

    list_page, alist_page = twins(_list_page, "list_page")

    def _semantic_rows(
        self, namespaces: list[tuple[str, ...]], query: str, candidates: int
    ) -> Flow[list[list[SearchItem]] | None]:
        """The store's semantic rows per namespace, or ``None`` when embedding failed under "auto"."""
        try:
            if self._single_pass:
                return (yield from self._scan(namespaces, query, None))
            semantic_filter = {"deleted": False, "embedding": self._identity}
            results = yield self._batch(
                [SearchOp(ns, filter=semantic_filter, limit=candidates, query=query) for ns in namespaces]
            )
            return [[r for r in found if r.namespace == ns] for ns, found in zip(namespaces, results, strict=True)]
        except UserError:
            raise
        except Exception as error:
            if self.semantic == "strict":
                raise
            logger.warning(
                "Semantic memory search failed (%s); answering from lexical search. "
                "Use semantic='strict' to raise instead.",
                type(error).__name__,
            )
            return None

    def _search(
        self,
        query: str,
        *,
        scopes: Sequence[MemoryScope],
        limit: int = 10,
        token_budget: int | None = None,
        actor: Actor | Mapping[str, Any] | None = None,
    ) -> Flow[list[MemoryItem]]:
        """The best live items of ``scopes`` for ``query``: lexical and semantic rankings fused by rank (RRF, k=60).

        Args:
            query: what to look for.
            scopes: every scope the search may read (no default: at least one).
            limit: at most this many items (1-1000).
            token_budget: keep items in rank order while their approximate tokens (characters / 4) fit.
            actor: when given, every scope is checked with `can_access_memory_scope`.

        Returns:
            Items, best first.

        Raises:
            UserError: no scopes, a bad query/limit/budget, a scope the actor may not access, or a namespace
                whose vectors come from another embedding model. Under ``semantic="strict"`` an embedding failure
                propagates.
        """
        if not isinstance(query, str) or not query.strip() or len(query) > _MAX_QUERY_CHARS:
            raise UserError(
                f"`query` must be a non-empty string of at most {_MAX_QUERY_CHARS} characters, got {query!r}."
            )
        _positive(limit, "limit")
        if token_budget is not None:
            _positive(token_budget, "token_budget", maximum=2**31)
        the_scopes = scope_list(scopes)
        self._checked(the_scopes, actor)
        namespaces = [item_namespace(self.namespace, s) for s in the_scopes]
        candidates = max(3 * limit, 30)
        semantic_rows = None
        if self._identity is not None:
            yield from self._check_identity()
            semantic_rows = yield from self._semantic_rows(namespaces, query, candidates)
        if self._single_pass and semantic_rows is not None:
            lexical_rows = semantic_rows
        else:
            lexical_rows = yield from self._scan(namespaces, None, None if self._single_pass else {"deleted": False})
        now = datetime.now(UTC)
        scope_of = dict(zip(namespaces, the_scopes, strict=True))
        matched, total, length_sum, rows = _lexical_candidates(lexical_rows, query_terms(query), now)
        lexical = bm25_ranking(matched, total=total, length_sum=length_sum)[:candidates]
        semantic: list[_Key] = []
        if semantic_rows is not None:
            for key, row in _semantic_candidates(semantic_rows, self._identity, now, candidates):
                rows.setdefault(key, row)
                semantic.append(key)
        picked: list[MemoryItem] = []
        used = 0
        for key in fuse([lexical, semantic]):
            item = self._parse(rows[key], key[0])
            if item.scope != scope_of[key[0]]:
                continue
            cost = item_tokens(item.content)
            if token_budget is not None and used + cost > token_budget:
                continue
            picked.append(item)
            used += cost
            if len(picked) == limit:
                break
        return picked

    search, asearch = twins(_search, "search")
