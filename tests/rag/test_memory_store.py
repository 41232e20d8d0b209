from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from ai_utils.exceptions import UserError
from ai_utils.rag.memory_store import MemoryVectorStore, create_ram_vector_store, top_k


class TestMemoryVectorStoreConformance(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self) -> Iterator[VectorStore]:
        yield MemoryVectorStore(self.get_embeddings())


def fake(size: int = 8) -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=size)


def test_store_keeps_metadata_and_ids_of_every_input_form() -> None:
    store = create_ram_vector_store(
        [
            "plain text",
            Document(page_content="a document", metadata={"src": "doc"}, id="doc-1"),
            {"page_content": "a mapping", "metadata": {"src": "map"}, "id": "map-1"},
        ],
        embeddings=fake(),
    )

    assert store.get_by_ids(["map-1", "doc-1"]) == [
        Document(page_content="a mapping", metadata={"src": "map"}, id="map-1"),
        Document(page_content="a document", metadata={"src": "doc"}, id="doc-1"),
    ]
    assert len(store) == 3


def test_filter_returns_only_matching_tenant_rows() -> None:
    store = create_ram_vector_store(
        [{"page_content": f"Schichtplan {n}", "metadata": {"company_id": "a" if n % 2 else "b"}} for n in range(10)],
        embeddings=fake(),
    )

    found = store.similarity_search("Schichtplan", k=10, filter={"company_id": "a"})

    assert len(found) == 5
    assert {doc.metadata["company_id"] for doc in found} == {"a"}


def test_filter_on_a_key_no_document_has_gives_an_empty_result() -> None:
    store = create_ram_vector_store(["eins", "zwei"], embeddings=fake())

    assert store.similarity_search("eins", filter={"compnay_id": "a"}) == []


def test_filter_accepts_a_predicate_and_nested_containment() -> None:
    store = create_ram_vector_store(
        [
            {"page_content": "x", "metadata": {"tags": {"lang": "de", "v": 1}}},
            {"page_content": "y", "metadata": {"tags": {"lang": "en"}}},
        ],
        embeddings=fake(),
    )

    assert [d.page_content for d in store.similarity_search("x", filter={"tags": {"lang": "de"}})] == ["x"]
    assert [d.page_content for d in store.similarity_search("x", filter=lambda d: d.page_content == "y")] == ["y"]


def test_filter_of_an_unsupported_type_is_a_user_error() -> None:
    store = create_ram_vector_store(["eins"], embeddings=fake())

    with pytest.raises(UserError, match="filter must be a metadata mapping"):
        store.similarity_search("eins", filter=["company_id"])  # type: ignore[arg-type]


def test_empty_data_is_refused() -> None:
    with pytest.raises(UserError, match="got no documents"):
        create_ram_vector_store([], embeddings=fake())


def test_adding_vectors_of_another_dimension_is_refused_and_writes_nothing() -> None:
    store = create_ram_vector_store(["eins", "zwei"], embeddings=fake(8))
    other = MemoryVectorStore(fake(16))

    with pytest.raises(UserError, match="16-dimensional vectors .* holds 8-dimensional"):
        store.add_vectors(["drei"], other.embeddings.embed_documents(["drei"]))

    assert len(store) == 2
    assert [d.page_content for d in store.similarity_search("eins", k=5)] == ["eins", "zwei"]


def test_querying_with_another_dimension_is_refused() -> None:
    store = create_ram_vector_store(["eins"], embeddings=fake(8))

    with pytest.raises(UserError, match="for the query"):
        store.similarity_search_by_vector([0.1] * 4)


def test_mismatched_ids_and_repeated_ids() -> None:
    store = MemoryVectorStore(fake())
    with pytest.raises(UserError, match="2 texts but 1 ids"):
        store.add_texts(["a", "b"], ids=["1"])

    assert store.add_texts(["old", "new"], ids=["same", "same"]) == ["same", "same"]
    assert store.get_by_ids(["same"]) == [Document(page_content="new", id="same")]
    assert len(store) == 1


def test_delete_without_ids_empties_the_store_and_it_can_be_reused() -> None:
    store = create_ram_vector_store([str(n) for n in range(100)], embeddings=fake())
    store.delete()
    assert store.similarity_search("1") == []
    store.add_texts(["again"])
    assert [d.page_content for d in store.similarity_search("again")] == ["again"]


def test_scores_are_cosine_similarities_and_relevance_is_in_zero_one() -> None:
    store = create_ram_vector_store(["eins", "zwei"], embeddings=fake())

    (best, score), _ = store.similarity_search_with_score("eins", k=2)
    relevance = store.similarity_search_with_relevance_scores("eins", k=2)

    assert best.page_content == "eins"
    assert score == pytest.approx(1.0, abs=1e-5)
    assert all(0.0 <= r <= 1.0 for _, r in relevance)


def test_a_document_found_by_its_own_text_scores_at_most_one_on_any_blas_kernel() -> None:
    # In float32 about half of these texts' unit vectors have a self-similarity just above 1 before clamping.
    texts = [f"text {n}" for n in range(40)]
    store = create_ram_vector_store(texts, embeddings=fake())

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # LangChain warns when a relevance score leaves [0, 1]
        for text in texts:
            ((doc, score),) = store.similarity_search_with_score(text, k=1)
            ((_, relevance),) = store.similarity_search_with_relevance_scores(text, k=1)
            assert doc.page_content == text
            assert 1.0 - 1e-6 <= score <= 1.0
            assert 1.0 - 1e-6 <= relevance <= 1.0


def test_top_k_orders_best_first() -> None:
    import numpy as np

    scores = np.asarray([0.1, 0.9, 0.5, 0.7], dtype=np.float32)

    assert top_k(scores, 2).tolist() == [1, 3]
    assert top_k(scores, 9).tolist() == [1, 3, 2, 0]


def test_growing_past_the_buffer_keeps_earlier_rows() -> None:
    store = MemoryVectorStore(fake())
    store.add_texts([f"früh {n}" for n in range(10)], ids=[f"a{n}" for n in range(10)])
    store.add_texts([f"spät {n}" for n in range(200)])

    assert len(store) == 210
    assert [d.id for d in store.similarity_search("früh 3", k=1)] == ["a3"]
    assert store.get_by_ids(["a9"])[0].page_content == "früh 9"


def test_from_texts_repr_dimension_and_trivial_calls() -> None:
    store = MemoryVectorStore.from_texts(["eins", "zwei"], fake(), metadatas=[{"n": 1}, {"n": 2}], ids=["1", "2"])

    assert repr(store) == "MemoryVectorStore(documents=2, dimension=8)"
    assert store.dimension == 8
    assert store.add_texts([]) == []
    assert store.similarity_search("eins", k=0) == []
    assert MemoryVectorStore(fake()).dimension is None


def test_ragged_or_miscounted_vectors_are_refused() -> None:
    store = MemoryVectorStore(fake())

    with pytest.raises(UserError, match="vectors of different sizes"):
        store.add_vectors(["a", "b"], [[1.0, 0.0], [1.0]])
    with pytest.raises(UserError, match="2 texts but 1 vectors"):
        store.add_vectors(["a", "b"], [[1.0, 0.0]])
    assert len(store) == 0
