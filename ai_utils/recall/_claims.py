"""Compare-and-swap on a store value: the one operation knowledge jobs need that `BaseStore` does not have.

`BaseStore.put` is a blind upsert, so two workers reading a queued job and both writing "running" would both
think they own it. Every job value carries a ``version``; a swap writes the new value only if the stored one still
has the version the writer read, and says whether it did. How depends on the backend:

- `InMemoryStore`: one `threading.Lock` per store instance around read-compare-write (the store lives in one
  process; every swap on it goes through this module).
- `PostgresStore`: one conditional ``UPDATE store ... WHERE prefix = %s AND key = %s AND value->>'version' = %s``
  on the store's own table and connection. A single statement is atomic under Postgres' row locking, so no
  transaction or advisory lock is needed: of two concurrent updates of a row the second re-checks the ``WHERE``
  after the first commits and matches nothing. Its ``rowcount`` is the answer. It holds the store's own lock, as
  the store's ``batch`` does, since the store's one connection serves one thread at a time.
- `SqliteStore`: the same conditional ``UPDATE`` (``json_extract(value, '$.version')``); SQLite serialises
  writers on the database file, so it is atomic across processes too.

Other stores (async-only ones included) have no way to do this through their public API and are refused.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from ai_utils._compat.langgraph import store_cursor, store_prefix
from ai_utils.exceptions import UserError

__all__ = ["Swap", "swapper"]

Swap = Callable[[tuple[str, ...], str, int, Mapping[str, Any]], bool]
"""``swap(namespace, key, expected_version, new_value) -> bool``: True when the value was replaced."""

_LOCKS: weakref.WeakKeyDictionary[BaseStore, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _memory_swap(store: InMemoryStore) -> Swap:
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(store, threading.Lock())

    def swap(namespace: tuple[str, ...], key: str, expected: int, value: Mapping[str, Any]) -> bool:
        with lock:
            current = store.get(namespace, key, refresh_ttl=False)
            if current is None or current.value.get("version") != expected:
                return False
            store.put(namespace, key, dict(value), index=False)
            return True

    return swap


def _sql_swap(
    store: BaseStore,
    sql: str,
    encode: Callable[[dict[str, Any]], Any],
    version: Callable[[int], Any],
    guard: AbstractContextManager[Any],
) -> Swap:
    def swap(namespace: tuple[str, ...], key: str, expected: int, value: Mapping[str, Any]) -> bool:
        with guard, store_cursor(store) as cur:
            cur.execute(sql, (encode(dict(value)), store_prefix(store, namespace), key, version(expected)))
            pipe = getattr(store, "pipe", None)
            if pipe is not None:
                pipe.sync()  # a PostgresStore in pipeline mode: the row count arrives only with the results
            return bool(cur.rowcount == 1)

    return swap


_POSTGRES_SWAP = (
    "UPDATE store SET value = %s, updated_at = CURRENT_TIMESTAMP "
    "WHERE prefix = %s AND key = %s AND value->>'version' = %s"
)
_SQLITE_SWAP = (
    "UPDATE store SET value = ?, updated_at = CURRENT_TIMESTAMP "
    "WHERE prefix = ? AND key = ? AND json_extract(value, '$.version') = ?"
)


def swapper(store: BaseStore) -> Swap:
    """The compare-and-swap for ``store`` (see the module docstring).

    Raises:
        UserError: a store without one (anything but `InMemoryStore`, `PostgresStore`, `SqliteStore`).
    """
    if isinstance(store, InMemoryStore):
        return _memory_swap(store)
    module = type(store).__module__
    # The store's own module is importable (the instance exists), so these imports cannot fail here.
    if module.startswith("langgraph.store.postgres"):
        from langgraph.store.postgres import PostgresStore

        if isinstance(store, PostgresStore):
            from psycopg.types.json import Jsonb

            # `PostgresStore.batch` holds the store's lock while it uses its one connection; a plain cursor does not,
            # so the swap takes it too: the lease renewer thread runs while the executor uses the same store.
            return _sql_swap(store, _POSTGRES_SWAP, Jsonb, str, store.lock)
    if module.startswith("langgraph.store.sqlite"):
        from langgraph.store.sqlite import SqliteStore

        if isinstance(store, SqliteStore):
            import orjson

            return _sql_swap(store, _SQLITE_SWAP, orjson.dumps, int, nullcontext())  # its cursor takes its lock
    raise UserError(
        f"KnowledgeJobs needs a store it can compare-and-swap on: InMemoryStore, PostgresStore or SqliteStore, got "
        f"{type(store).__name__}. Pass one of those (async-only stores have no atomic update we can use)."
    )
