"""Semantic memory search on the store's own index: rank fusion, fallbacks, embedding identity.

Runs on InMemoryStore and PostgresStore with pgvector (see conftest: SqliteStore's vector index cannot load on
this CPython build).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import pytest
from langgraph.store.base import BaseStore
from recall._fakes import FailingEmbeddings, TableEmbeddings, index

from ai_utils import MemoryItemStore, MemoryScope, UserError, create_memory_item
from ai_utils.recall import MemoryItem

EXPLICIT = {"source": "explicit", "actor": "user"}
ALICE = MemoryScope("user", "alice")
QUERY = "vegetarian dinner ideas"
LEXICAL_FIRST = "Vegetarian dinner ideas from the old cookbook"  # every query word, unrelated meaning
BOTH_SECOND = "Likes vegetarian dinner with friends"  # two query words, close meaning
SEMANTIC_FIRST = "Enjoys plant-based evening meals"  # no query word, the same meaning
FILLERS = [f"Filler memory number {n} about gardening" for n in range(40)]


def _vector(cos: float, axis: int) -> list[float]:
    v = [0.0] * 8
    v[0], v[axis] = cos, math.sqrt(max(0.0, 1 - cos * cos))
    return v


def _geometry() -> TableEmbeddings:
    table = {
        QUERY: _vector(1.0, 1),
        SEMANTIC_FIRST: _vector(1.0, 1),
        BOTH_SECOND: _vector(0.9, 1),
        LEXICAL_FIRST: _vector(0.0, 3),
        **{text: _vector(0.8 - n * 0.01, 2) for n, text in enumerate(FILLERS)},
    }
    return TableEmbeddings(table)


def _add(memory: MemoryItemStore, content: str, scope: MemoryScope = ALICE) -> MemoryItem:
    return memory.add(create_memory_item(scope=scope, kind="fact", content=content, provenance=EXPLICIT))


StoreFactory = Callable[..., BaseStore]


def test_an_item_second_in_both_rankings_beats_items_first_in_one_only(make_indexed_store: StoreFactory) -> None:
    store = make_indexed_store(index(_geometry()))
    memory = MemoryItemStore(store, namespace="app")
    lexical_first, both, semantic_first = (_add(memory, t) for t in (LEXICAL_FIRST, BOTH_SECOND, SEMANTIC_FIRST))
    for text in FILLERS:
        _add(memory, text)

    # Each ranking alone: lexical puts LEXICAL_FIRST first, the store's own semantic search SEMANTIC_FIRST.
    lexical_only = MemoryItemStore(store, namespace="app", semantic="off")
    assert [i.id for i in lexical_only.search(QUERY, scopes=[ALICE], limit=2)] == [lexical_first.id, both.id]
    raw = [r.value["content"] for r in store.search(("app", "user"), query=QUERY, limit=100) if "content" in r.value]
    assert raw[:2] == [SEMANTIC_FIRST, BOTH_SECOND]
    assert raw.index(LEXICAL_FIRST) > 30  # not among the semantic candidates

    # Fused by rank: 2/(60+2) beats 1/(60+1), whatever the raw scores were.
    fused = memory.search(QUERY, scopes=[ALICE], limit=3)
    assert fused[0].id == both.id
    assert {i.id for i in fused[1:]} == {lexical_first.id, semantic_first.id}


def test_semantic_search_finds_a_match_without_a_shared_word(make_indexed_store: StoreFactory) -> None:
    memory = MemoryItemStore(make_indexed_store(index(_geometry())), namespace="app")
    target = _add(memory, SEMANTIC_FIRST)
    _add(memory, FILLERS[-1])
    assert memory.search(QUERY, scopes=[ALICE], limit=1) == [target]
    assert MemoryItemStore(memory.store, namespace="app", semantic="off").search(QUERY, scopes=[ALICE]) == []


def test_a_failing_embedder_falls_back_to_lexical_under_auto_and_raises_under_strict(
    make_indexed_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    embeddings = FailingEmbeddings()
    store = make_indexed_store(index(embeddings))
    auto = MemoryItemStore(store, namespace="app")
    strict = MemoryItemStore(store, namespace="app", semantic="strict")
    item = _add(auto, "Allergic to peanuts.")

    embeddings.failing = True  # the provider goes down
    with caplog.at_level(logging.WARNING, logger="ai_utils.recall"):
        assert auto.search("peanuts", scopes=[ALICE]) == [item]
    assert "answering from lexical search" in caplog.text and "ConnectionError" in caplog.text
    with pytest.raises(ConnectionError):
        strict.search("peanuts", scopes=[ALICE])
    # A write whose embedding fails: stored without a vector under auto (found lexically), refused under strict.
    unindexed = _add(auto, "Allergic to shellfish.")
    with pytest.raises(ConnectionError):
        _add(strict, "Allergic to gluten.")

    embeddings.failing = False  # back up
    assert auto.get(ALICE, unindexed.id) == unindexed
    assert unindexed in auto.search("shellfish", scopes=[ALICE])
    assert all("gluten" not in i.content for i in strict.search("gluten", scopes=[ALICE]))


async def test_async_search_falls_back_the_same_way(make_indexed_store: StoreFactory) -> None:
    embeddings = FailingEmbeddings()
    memory = MemoryItemStore(make_indexed_store(index(embeddings)), namespace="app")
    item = await memory.aadd(
        create_memory_item(scope=ALICE, kind="fact", content="Cycles to work.", provenance=EXPLICIT)
    )
    embeddings.failing = True
    assert await memory.asearch("cycles", scopes=[ALICE]) == [item]


class OtherModel(TableEmbeddings):
    """Same dimensions, another model: its vectors must never be compared with TableEmbeddings' ones."""


def test_vectors_of_another_embedding_identity_are_refused_never_compared(make_indexed_store: StoreFactory) -> None:
    first = TableEmbeddings()
    store = make_indexed_store(index(first))
    memory = MemoryItemStore(store, namespace="app", embeddings=first)
    _add(memory, "Speaks French.")
    assert memory.embedding_identity is not None and "table-8|8" in memory.embedding_identity

    # The same namespace read through a store whose index embeds with another model: refused.
    with pytest.raises(UserError, match="vectors of different models are never compared"):
        MemoryItemStore(store, namespace="app", embeddings=OtherModel())
    relabelled = TableEmbeddings()
    relabelled.model = "another-model"
    store.embeddings = relabelled  # type: ignore[attr-defined]  # what a store re-created with another model has
    swapped = MemoryItemStore(store, namespace="app")
    with pytest.raises(UserError, match="holds vectors made by"):
        swapped.search("french", scopes=[ALICE])
    with pytest.raises(UserError, match="holds vectors made by"):
        _add(swapped, "Speaks German.")
    # Lexical-only access stays possible, and says so by choice.
    assert [
        i.content for i in MemoryItemStore(store, namespace="app", semantic="off").search("french", scopes=[ALICE])
    ] == ["Speaks French."]


def test_embeddings_for_a_store_without_an_index_are_refused_with_the_fix() -> None:
    from langgraph.store.memory import InMemoryStore

    with pytest.raises(UserError, match=r"InMemoryStore\(index="):
        MemoryItemStore(InMemoryStore(), namespace="app", embeddings=TableEmbeddings())
