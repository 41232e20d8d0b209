"""RAG (reference/performance.md metric 7): our stores against the raw libraries, on random unit vectors.

- query (vector given, the same float32 array on both sides): `FaissVectorStore.similarity_search_by_vector`
  (Documents included) vs ``IndexFlatIP.search`` on the store's own index with one OpenMP thread, at N = 10k
  and 100k (dim 384, k = 4); target <= 1.3.
- in-memory: `MemoryVectorStore.similarity_search_by_vector` vs numpy ``X @ q`` + ``argpartition`` on the
  store's own matrix; <= 1.5.
- index build (10k): `FaissVectorStore.add_vectors` vs the steps of langchain-community's
  ``FAISS.from_embeddings`` (float32 matrix, normalise, ``IndexFlatIP.add``, uuid4 ids, one `Document` per
  text, a docstore dict and a row -> id map); langchain-community is not installed here, so the anchor
  re-does those steps with faiss directly; <= 1.2.

No embedding model runs: vectors are given, so only store overhead is measured.
"""

from __future__ import annotations

import uuid
from typing import Any

import faiss
import numpy as np
from _harness import Metric
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from ai_utils.rag.faiss import FaissVectorStore
from ai_utils.rag.memory_store import MemoryVectorStore

DIM = 384
K = 4


def _unit(rows: int, seed: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    matrix = np.random.default_rng(seed).standard_normal((rows, DIM), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def _query_metrics(n: int) -> list[Metric]:
    vectors = _unit(n, seed=n)
    texts = [f"doc {i}" for i in range(n)]
    query = _unit(1, seed=7)
    query_vector = query[0]  # both sides get the same float32 vector (a list would add ~20 µs of conversion)
    embedding = DeterministicFakeEmbedding(size=DIM)

    # The anchors search the very index / matrix the stores hold: where a 15-150 MB buffer lands in memory
    # changed a raw faiss query by up to 1.5x here, which would swamp the wrapper overhead being measured.
    store = FaissVectorStore(embedding)
    store.add_vectors(texts, vectors)
    index = store.index

    memory = MemoryVectorStore(embedding)
    memory.add_vectors(texts, vectors)
    matrix = memory._matrix

    def faiss_ours() -> None:
        assert len(store.similarity_search_by_vector(query_vector, k=K)) == K

    def faiss_anchor() -> None:
        faiss.omp_set_num_threads(1)
        _, found = index.search(query, K)
        assert found.shape == (1, K)

    def memory_ours() -> None:
        assert len(memory.similarity_search_by_vector(query_vector, k=K)) == K

    def memory_anchor() -> None:
        scores = matrix @ query[0]
        part = np.argpartition(-scores, K - 1)[:K]
        assert part[np.argsort(-scores[part])].shape == (K,)

    label = f"{n // 1000}k"
    return [
        Metric(
            f"rag query (vector given) N={label} / faiss IndexFlatIP 1 thread",
            faiss_ours,
            faiss_anchor,
            target=1.3,
            note=f"FaissVectorStore.similarity_search_by_vector(k={K}) incl. Documents vs index.search, dim {DIM}.",
        ),
        Metric(
            f"rag in-memory query N={label} / numpy X@q+argpartition",
            memory_ours,
            memory_anchor,
            target=1.5,
            note=f"MemoryVectorStore.similarity_search_by_vector(k={K}) incl. Documents vs numpy, dim {DIM}.",
        ),
    ]


def _build_metric(n: int) -> Metric:
    vectors = _unit(n, seed=11) * 3.0  # not unit length: both sides normalise
    texts = [f"doc {i}" for i in range(n)]
    metadatas: list[dict[str, Any]] = [{"row": i} for i in range(n)]
    embedding = DeterministicFakeEmbedding(size=DIM)

    def ours() -> None:
        store = FaissVectorStore(embedding)
        store.add_vectors(texts, vectors, metadatas=metadatas)
        assert len(store) == n

    def anchor() -> None:  # the steps of langchain_community FAISS.from_embeddings(..., normalize_L2=True)
        matrix = np.array(vectors, dtype=np.float32)
        faiss.normalize_L2(matrix)
        index = faiss.IndexFlatIP(DIM)
        index.add(matrix)
        ids = [str(uuid.uuid4()) for _ in texts]
        docs = [Document(page_content=t, metadata=m) for t, m in zip(texts, metadatas, strict=True)]
        docstore = dict(zip(ids, docs, strict=True))
        index_to_id = dict(enumerate(ids))
        assert len(docstore) == len(index_to_id) == n

    return Metric(
        f"rag index build N={n // 1000}k / FAISS.from_embeddings steps",
        ours,
        anchor,
        target=1.2,
        rounds=15,
        note="FaissVectorStore.add_vectors vs from_embeddings' steps done with faiss directly "
        "(langchain-community is not installed).",
    )


def metrics() -> list[Metric]:
    return [*_query_metrics(10_000), *_query_metrics(100_000), _build_metric(10_000)]
