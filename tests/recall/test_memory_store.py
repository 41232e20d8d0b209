"""`MemoryItemStore` on every backend (InMemoryStore, SqliteStore, PostgresStore): CRUD, dedupe, pages, isolation."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from langgraph.store.base import BaseStore

from ai_utils import Actor, MemoryItemStore, MemoryScope, UserError, create_memory_item
from ai_utils.recall import MemoryItem

EXPLICIT = {"source": "explicit", "actor": "user"}
StoreFactory = Callable[..., BaseStore]


def _item(scope: MemoryScope, content: str, kind: str = "fact", **extra: object) -> MemoryItem:
    return create_memory_item(scope=scope, kind=kind, content=content, provenance=EXPLICIT, **extra)  # type: ignore[arg-type]


def test_add_get_update_forget_round_trip(make_store: StoreFactory) -> None:
    memory = MemoryItemStore(make_store(), namespace="app")
    alice = MemoryScope("user", "alice@example.com")  # an email: "." works as a subject id
    item = memory.add(_item(alice, "Prefers tea."))
    assert memory.get(alice, item.id) == item

    updated = memory.update(alice, item.id, content="Prefers green tea.", kind="preference")
    assert (updated.content, updated.kind, updated.created_at) == ("Prefers green tea.", "preference", item.created_at)
    assert updated.updated_at > item.updated_at
    assert memory.get(alice, item.id) == updated
    # An update followed by a search finds the new text, not the old one.
    assert [i.content for i in memory.search("green tea", scopes=[alice])] == ["Prefers green tea."]

    assert memory.forget(alice, item.id) is True
    assert memory.get(alice, item.id) is None
    assert memory.search("tea", scopes=[alice]) == []
    assert memory.list_page(alice) == ([], None)
    assert memory.forget(alice, item.id) is False  # already forgotten
    with pytest.raises(UserError, match="No memory item"):
        memory.update(alice, item.id, content="x")


def test_exact_duplicates_are_stored_once_and_a_forgotten_one_can_be_remembered_again(make_store: StoreFactory) -> None:
    memory = MemoryItemStore(make_store(), namespace="app")
    alice = MemoryScope("user", "alice")
    first = memory.add(_item(alice, "Prefers concise answers."))
    again = memory.add(_item(alice, "  prefers CONCISE answers. "))
    assert again == first
    assert [i.id for i in memory.list_page(alice)[0]] == [first.id]

    # Updating it frees its text; the derived id is then taken by the changed item, so the re-added text gets
    # a new id and is still stored once.
    memory.update(alice, first.id, content="Prefers long answers.")
    back = memory.add(_item(alice, "Prefers concise answers."))
    assert back.id != first.id
    assert memory.add(_item(alice, "Prefers concise answers.")) == back
    with pytest.raises(UserError, match="already says that"):
        memory.update(alice, first.id, content="prefers concise answers.")

    memory.forget(alice, back.id)
    reborn = memory.add(_item(alice, "Prefers concise answers."))
    assert memory.get(alice, reborn.id) == reborn
    assert len(memory.list_page(alice)[0]) == 2


def test_two_users_two_namespaces_one_store_never_see_each_others_items(make_store: StoreFactory) -> None:
    store = make_store()
    app, other_app = MemoryItemStore(store, namespace="acme"), MemoryItemStore(store, namespace="acme-corp")
    # Sibling ids that a prefix match or a LIKE wildcard would confuse.
    john_dash, john_under = MemoryScope("user", "john-doe"), MemoryScope("user", "john_doe")
    john_long = MemoryScope("user", "john-doe-2")
    secrets = {
        john_dash: app.add(_item(john_dash, "John-dash likes chess.")),
        john_under: app.add(_item(john_under, "John-under likes chess.")),
        john_long: app.add(_item(john_long, "John-long likes chess.")),
    }
    foreign = other_app.add(_item(john_dash, "Acme-corp john likes chess."))
    for scope, item in secrets.items():
        assert [i.id for i in app.search("chess", scopes=[scope])] == [item.id]
        assert [i.id for i in app.list_page(scope)[0]] == [item.id]
        for other, other_item in secrets.items():
            if other != scope:
                assert app.get(scope, other_item.id) is None
                assert app.forget(scope, other_item.id) is False
                with pytest.raises(UserError, match="No memory item"):
                    app.update(scope, other_item.id, content="hijacked")
    assert [i.id for i in other_app.search("chess", scopes=[john_dash])] == [foreign.id]
    assert app.get(john_dash, foreign.id) is None
    # Both users' items are still intact after the attempts.
    assert app.get(john_under, secrets[john_under].id) == secrets[john_under]


def test_search_reads_only_the_named_scopes_and_has_no_default(make_store: StoreFactory) -> None:
    memory = MemoryItemStore(make_store(), namespace="app")
    alice, team = MemoryScope("user", "alice"), MemoryScope("tenant", "team-1")
    mine = memory.add(_item(alice, "Alice prefers dark mode."))
    shared = memory.add(_item(team, "The team prefers dark mode in demos."))
    assert {i.id for i in memory.search("dark mode", scopes=[alice, team])} == {mine.id, shared.id}
    assert [i.id for i in memory.search("dark mode", scopes=[team])] == [shared.id]
    with pytest.raises(UserError, match="no global default"):
        memory.search("dark mode", scopes=[])
    with pytest.raises(UserError, match="list of MemoryScope"):
        memory.search("dark mode", scopes=alice)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="may not access memory scope 'tenant'"):
        memory.search("dark mode", scopes=[alice, team], actor=Actor(user_id="alice"))
    assert memory.search("dark mode", scopes=[alice], actor=Actor(user_id="alice")) == [mine]


def test_search_default_limit_is_ten_and_the_token_budget_is_kept(make_store: StoreFactory) -> None:
    memory = MemoryItemStore(make_store(), namespace="app")
    alice = MemoryScope("user", "alice")
    for n in range(15):
        memory.add(_item(alice, f"Coffee note {n}: " + "word " * n))
    assert len(memory.search("coffee", scopes=[alice])) == 10
    budgeted = memory.search("coffee", scopes=[alice], limit=15, token_budget=40)
    assert budgeted and sum(-(-len(i.content) // 4) + 6 for i in budgeted) <= 40


def test_expired_items_are_never_returned(make_store: StoreFactory) -> None:
    memory = MemoryItemStore(make_store(), namespace="app")
    alice = MemoryScope("user", "alice")
    item = memory.add(_item(alice, "Is on holiday.", expires_at=datetime.now(UTC) + timedelta(milliseconds=300)))
    assert memory.get(alice, item.id) == item
    deadline = time.monotonic() + 10
    while memory.get(alice, item.id) is not None:  # wait for the clock to pass expires_at (bounded)
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert memory.search("holiday", scopes=[alice]) == []
    assert memory.list_page(alice) == ([], None)
    with pytest.raises(UserError, match="not in the future"):
        memory.add(_item(alice, "Is back.", expires_at=datetime.now(UTC) + timedelta(days=1)))
        memory.update(alice, memory.list_page(alice)[0][0].id, expires_at=datetime.now(UTC) - timedelta(days=1))
    created_long_ago = _item(
        alice, "Old news.", now=datetime(2020, 1, 1, tzinfo=UTC), expires_at=datetime(2020, 1, 2, tzinfo=UTC)
    )
    with pytest.raises(UserError, match="deleted or expired"):
        memory.add(created_long_ago)


def test_list_page_walks_keyset_pages_in_created_order(make_store: StoreFactory) -> None:
    memory = MemoryItemStore(make_store(), namespace="app")
    alice = MemoryScope("user", "alice")
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    # Five items share one created_at: the id breaks the tie.
    added = [memory.add(_item(alice, f"Note {n}.", now=moment + timedelta(seconds=n // 5))) for n in range(12)]
    seen, cursor, pages = [], None, 0
    while True:
        items, cursor = memory.list_page(alice, cursor=cursor, limit=5)
        seen.extend(items)
        pages += 1
        if cursor is None:
            break
    assert pages == 3
    assert seen == sorted(added, key=lambda i: (i.created_at, i.id))
    # A page that ends exactly at the last item has no next cursor.
    assert memory.list_page(alice, limit=12)[1] is None


def test_cursors_are_bound_to_their_namespace_and_scope_and_validated_whole(make_store: StoreFactory) -> None:
    store = make_store()
    memory, elsewhere = MemoryItemStore(store, namespace="app"), MemoryItemStore(store, namespace="app2")
    alice, bob = MemoryScope("user", "alice"), MemoryScope("user", "bob")
    for n in range(3):
        memory.add(_item(alice, f"Alice note {n}."))
        memory.add(_item(bob, f"Bob note {n}."))
    _, cursor = memory.list_page(alice, limit=1)
    assert cursor is not None
    with pytest.raises(UserError, match="belongs to another namespace or scope"):
        memory.list_page(bob, cursor=cursor)
    with pytest.raises(UserError, match="belongs to another namespace or scope"):
        elsewhere.list_page(alice, cursor=cursor)
    forged = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    body = json.loads(forged["b"])
    body["c"] = -5
    tampered = base64.urlsafe_b64encode(json.dumps({"b": json.dumps(body), "h": forged["h"]}).encode()).decode()
    for bad in [cursor + "\n", cursor[:-2], tampered.rstrip("="), "", "not a cursor!", 42]:
        with pytest.raises(UserError, match="Invalid memory cursor"):
            memory.list_page(alice, cursor=bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="`limit` must be an int from 1 to 1000"):
        memory.list_page(alice, limit=0)


async def test_async_twins_share_the_one_core(make_store: StoreFactory) -> None:
    memory = MemoryItemStore(make_store(), namespace="app")
    alice = MemoryScope("user", "alice")
    item = await memory.aadd(_item(alice, "Prefers async."))
    assert await memory.aget(alice, item.id) == item
    assert [i.id for i in await memory.asearch("async", scopes=[alice])] == [item.id]
    updated = await memory.aupdate(alice, item.id, content="Prefers asyncio.")
    assert (await memory.alist_page(alice))[0] == [updated]
    assert await memory.aforget(alice, item.id) is True


def test_constructor_and_call_arguments_are_checked(make_store: StoreFactory) -> None:
    store = make_store()
    for namespace in ["", "a.b", "langgraph", "x" * 65, "with space", "-lead"]:
        with pytest.raises(UserError, match="`namespace` must be"):
            MemoryItemStore(store, namespace=namespace)
    with pytest.raises(UserError, match="must be a LangGraph BaseStore"):
        MemoryItemStore({}, namespace="app")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="semantic"):
        MemoryItemStore(store, namespace="app", semantic="sometimes")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="semantic='strict' needs a store with a vector index"):
        MemoryItemStore(store, namespace="app", semantic="strict")
    memory = MemoryItemStore(store, namespace="app")
    alice = MemoryScope("user", "alice")
    with pytest.raises(UserError, match="non-empty string"):
        memory.search("", scopes=[alice])
    with pytest.raises(UserError, match="item id"):
        memory.get(alice, "../etc\n")
    with pytest.raises(UserError, match="takes a MemoryItem"):
        memory.add({"content": "x"})  # type: ignore[arg-type]


def test_a_forgotten_or_expired_items_id_is_never_given_to_a_new_item(make_store: StoreFactory) -> None:
    memory = MemoryItemStore(make_store(), namespace="app")
    alice = MemoryScope("user", "alice")
    forgotten = memory.add(_item(alice, "Lives in Berlin."))
    assert memory.forget(alice, forgotten.id) is True
    # The same text remembered again is a new item: the forgotten one's id still answers "nothing".
    again = memory.add(_item(alice, "Lives in Berlin."))
    assert again.id != forgotten.id
    assert memory.get(alice, forgotten.id) is None
    assert memory.forget(alice, forgotten.id) is False
    assert [i.id for i in memory.list_page(alice)[0]] == [again.id]

    expired = memory.add(_item(alice, "Is on holiday.", expires_at=datetime.now(UTC) + timedelta(seconds=0.2)))
    time.sleep(0.3)
    fresh = memory.add(_item(alice, "Is on holiday."))
    assert fresh.id != expired.id and memory.get(alice, expired.id) is None
    with pytest.raises(UserError, match="in use"):
        memory.add(_item(alice, "Something else.", id=forgotten.id))
