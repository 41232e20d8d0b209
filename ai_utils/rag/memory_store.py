"""`MemoryVectorStore`: an in-process store over one contiguous numpy matrix (exact cosine search).

LangChain's ``InMemoryVectorStore`` scores documents one by one in Python (about 1 s per query at 100k
documents); this store does one ``X @ q`` and an ``argpartition``, which stays within a small factor of raw
numpy at any size. Nothing is persisted; use `create_faiss_store` for a store you can save.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings

from ai_utils.rag._array_store import ArrayVectorStore, Matrix
from ai_utils.rag._numpy import np, npt

__all__ = ["MemoryVectorStore", "create_ram_vector_store", "top_k"]


def top_k(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.int64]:
    """Indices of the ``k`` highest scores, best first (argpartition, then a sort of only those ``k``)."""
    if k >= scores.shape[0]:
        return np.argsort(-scores, kind="stable").astype(np.int64)
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")].astype(np.int64)


class MemoryVectorStore(ArrayVectorStore):
    """An in-memory LangChain `VectorStore` (cosine similarity over unit-normalised float32 vectors).

    Example:
        ```python
        store = MemoryVectorStore(get_embeddings("local"))
        store.add_documents(turn_to_docs(["Die Frühschicht beginnt um 6 Uhr."]))
        store.similarity_search("Wann beginnt die Frühschicht?", k=1)
        ```

    Args:
        embedding: the embedding model for texts and queries.
    """

    def _reset(self) -> None:
        self._buffer: Matrix = np.zeros((0, 0), dtype=np.float32)

    @property
    def _matrix(self) -> Matrix:
        return self._buffer[: len(self._ids)]

    def _append(self, vectors: Matrix) -> None:
        used = len(self._ids)
        needed = used + vectors.shape[0]
        if self._buffer.shape[1] != vectors.shape[1] or needed > self._buffer.shape[0]:
            grown = np.zeros((max(needed, 2 * self._buffer.shape[0], 64), vectors.shape[1]), dtype=np.float32)
            if used:
                grown[:used] = self._buffer[:used]
            self._buffer = grown
        self._buffer[used:needed] = vectors

    def _remove_rows(self, rows: Sequence[int]) -> None:
        used = len(self._ids)
        keep = np.ones(used, dtype=bool)
        keep[list(rows)] = False
        kept = self._buffer[:used][keep]
        self._buffer[: kept.shape[0]] = kept

    def _search(self, query: Matrix, k: int, rows: Sequence[int] | None) -> tuple[Matrix, npt.NDArray[np.int64]]:
        if rows is None:
            scores = self._matrix @ query[0]
            found = top_k(scores, k)
            return scores[found], found
        index = np.asarray(rows, dtype=np.int64)
        scores = self._matrix[index] @ query[0]
        found = top_k(scores, k)
        return scores[found], index[found]


def create_ram_vector_store(
    data: Any, *, embeddings: Embeddings | None = None, progress: bool | None = None
) -> MemoryVectorStore:
    """Build an in-memory vector store from documents.

    Example:
        ```python
        store = create_ram_vector_store(["Die Frühschicht beginnt um 6 Uhr.", "Die Kantine öffnet um 11:30."])
        chain = Chain(prompt="Antworte nur mit dem Kontext.", vector_store=store)
        ```

    Args:
        data: strings, `Document`s or ``{page_content, metadata}`` mappings (see `turn_to_docs`); ids are kept.
        embeddings: the embedding model; default: the offline local model (`get_embeddings("local")`).
        progress: show a progress bar while embedding (default: for large ingests on a terminal or in Jupyter).

    Returns:
        The store.

    Raises:
        UserError: ``data`` is empty or holds an unsupported item.
    """
    return MemoryVectorStore.from_data(data, embeddings=embeddings, progress=progress, caller="create_ram_vector_store")
