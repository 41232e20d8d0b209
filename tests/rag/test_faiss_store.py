from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from ai_utils.exceptions import UserError
from ai_utils.rag.faiss import FaissVectorStore, create_faiss_store, load_faiss_store


class TestFaissVectorStoreConformance(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self) -> Iterator[VectorStore]:
        yield FaissVectorStore(self.get_embeddings())


def fake(size: int = 8) -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=size)


DOCS = [
    {"page_content": f"Dokument {n}", "metadata": {"company_id": "a" if n % 2 else "b", "n": n}, "id": f"d{n}"}
    for n in range(20)
]

_CHILD = """
import json, sys
from langchain_core.embeddings import DeterministicFakeEmbedding
from ai_utils.rag.faiss import load_faiss_store
store = load_faiss_store(sys.argv[1], embeddings=DeterministicFakeEmbedding(size=8))
hits = store.similarity_search_with_score("Dokument 3", k=4, filter={"company_id": "a"})
print(json.dumps([[d.id, d.page_content, d.metadata, s] for d, s in hits]))
"""


def test_saved_store_gives_the_same_results_in_a_new_process(tmp_path: Path) -> None:
    store = create_faiss_store(DOCS, embeddings=fake())
    store.delete(["d1"])
    store.save_local(tmp_path / "index")
    expected = [
        [d.id, d.page_content, d.metadata, pytest.approx(s, abs=1e-6)]
        for d, s in store.similarity_search_with_score("Dokument 3", k=4, filter={"company_id": "a"})
    ]

    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "index")], capture_output=True, text=True, check=True
    )

    assert json.loads(child.stdout) == expected
    assert expected[0][:3] == ["d3", "Dokument 3", {"company_id": "a", "n": 3}]


def test_loaded_store_accepts_updates_by_id(tmp_path: Path) -> None:
    create_faiss_store(DOCS, embeddings=fake()).save_local(tmp_path)
    store = load_faiss_store(tmp_path, embeddings=fake())

    store.add_documents([Document(page_content="neu", metadata={"v": 2}, id="d0")])

    assert store.get_by_ids(["d0"]) == [Document(page_content="neu", metadata={"v": 2}, id="d0")]
    assert len(store) == 20


def test_loading_with_an_embedding_of_another_size_is_refused_at_the_first_query(tmp_path: Path) -> None:
    create_faiss_store(DOCS, embeddings=fake(8)).save_local(tmp_path)
    store = load_faiss_store(tmp_path, embeddings=fake(16))

    with pytest.raises(UserError, match="16-dimensional vectors for the query, but this store holds 8"):
        store.similarity_search("Dokument")


def test_loading_a_directory_without_a_store_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="No FAISS store saved at"):
        load_faiss_store(tmp_path, embeddings=fake())
    (tmp_path / "documents.json").write_text('{"format": "other"}')
    create_faiss_store(["x"], embeddings=fake()).index  # noqa: B018
    import faiss

    faiss.write_index(faiss.IndexFlatIP(8), str(tmp_path / "index.faiss"))
    with pytest.raises(UserError, match="does not hold a FAISS store saved by ai_utils"):
        load_faiss_store(tmp_path, embeddings=fake())


def test_saving_an_empty_store_or_unserialisable_metadata_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="empty"):
        FaissVectorStore(fake()).save_local(tmp_path)
    store = create_faiss_store([Document(page_content="x", metadata={"when": object()})], embeddings=fake())
    with pytest.raises(UserError, match="Store only JSON values"):
        store.save_local(tmp_path)
    assert not (tmp_path / "index.faiss").exists()


def test_filtered_search_with_a_key_nobody_has_is_empty_and_tenants_stay_apart() -> None:
    store = create_faiss_store(DOCS, embeddings=fake())

    assert store.similarity_search("Dokument 1", k=20, filter={"compnay_id": "a"}) == []
    found = store.similarity_search("Dokument 1", k=20, filter={"company_id": "b"})
    assert len(found) == 10
    assert {d.metadata["company_id"] for d in found} == {"b"}


def test_empty_data_is_refused() -> None:
    with pytest.raises(UserError, match=r"create_faiss_store\(\) got no documents"):
        create_faiss_store([], embeddings=fake())


def test_adding_with_another_embedding_size_to_a_loaded_store_writes_nothing(tmp_path: Path) -> None:
    create_faiss_store(DOCS, embeddings=fake(8)).save_local(tmp_path)
    store = load_faiss_store(tmp_path, embeddings=fake(16))

    with pytest.raises(UserError, match="16-dimensional vectors for 1 texts, but this store holds 8-dimensional"):
        store.add_texts(["neu"], ids=["d0"])

    assert len(store) == 20
    assert store.get_by_ids(["d0"])[0].page_content == "Dokument 0"
