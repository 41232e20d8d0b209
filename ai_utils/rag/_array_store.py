"""Shared core of the in-process stores (in-memory, FAISS): ids, documents, filters, upserts.

Rows are kept in insertion order in three parallel structures: ``_ids``, ``_docs`` and the backend's
vector matrix (unit-normalised float32, so inner product = cosine). Upserting an existing id removes
its old row first; deleting compacts while keeping the order, exactly like ``faiss.IndexFlat.remove_ids``.
Subclasses supply only the matrix operations (`_append`, `_remove_rows`, `_search`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ai_utils.exceptions import UserError
from ai_utils.rag._numpy import np, npt
from ai_utils.rag._store import EmbeddedTexts, EmbeddingVectorStore
from ai_utils.rag.documents import assign_ids, non_empty_docs
from ai_utils.rag.embeddings import resolve_embeddings

__all__ = ["ArrayVectorStore", "Filter", "Matrix", "matches_filter", "normalise", "to_matrix"]

Matrix = npt.NDArray[np.float32]
Filter = Mapping[str, Any] | Callable[[Document], bool]
StoreT = TypeVar("StoreT", bound="ArrayVectorStore")


def matches_filter(metadata: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Containment, like Postgres' ``metadata @> filter``: every key present with an equal value.

    A key no document has therefore matches nothing (an empty result, never rows of another tenant).
    Nested mappings are compared by containment too.
    """
    for key, expected in filter.items():
        if key not in metadata:
            return False
        actual = metadata[key]
        if isinstance(expected, Mapping) and isinstance(actual, Mapping):
            if not matches_filter(actual, expected):
                return False
        elif actual != expected:
            return False
    return True


def _check_filter(filter: Any) -> None:
    if filter is not None and not isinstance(filter, Mapping) and not callable(filter):
        raise UserError(
            f"filter must be a metadata mapping or a function Document -> bool, got {filter!r}. "
            "Pass e.g. filter={'company_id': 'company-1'}."
        )


def to_matrix(vectors: Sequence[float] | Sequence[Sequence[float]] | Matrix, *, dim: int | None, what: str) -> Matrix:
    """Vectors as a contiguous float32 matrix, checked against the store's dimension ``dim``.

    Raises:
        UserError: the vectors are ragged or their size is not ``dim``.
    """
    try:
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    except ValueError as error:
        raise UserError(
            f"The embeddings returned vectors of different sizes for {what}. Use one embedding model."
        ) from error
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    if dim is not None and matrix.shape[1] != dim:
        raise UserError(
            f"The embeddings give {matrix.shape[1]}-dimensional vectors for {what}, but this store holds "
            f"{dim}-dimensional ones. Use the embedding model the store was built with, or build a new store."
        )
    return matrix


def normalise(matrix: Matrix) -> Matrix:
    """Rows scaled to unit length (zero rows stay zero), so inner product is cosine similarity."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


class ArrayVectorStore(EmbeddingVectorStore):
    """A `VectorStore` over an in-process matrix of unit vectors (cosine similarity), with ids and metadata.

    Subclasses implement `_append`, `_remove_rows`, `_search` and `_reset`. Thread-safe for concurrent
    calls; async methods run the sync ones in LangChain's executor.
    """

    def __init__(self, embedding: Embeddings) -> None:
        self._embedding = embedding
        self._ids: list[str] = []
        self._docs: list[Document] = []
        self._rows: dict[str, int] = {}
        self._dim: int | None = None
        self._lock = threading.RLock()
        self._reset()

    # --- backend hooks ---------------------------------------------------------------------------------
    def _reset(self) -> None:
        """Set up the backend's empty matrix (called by ``__init__``)."""
        raise NotImplementedError

    def _append(self, vectors: Matrix) -> None:
        raise NotImplementedError

    def _remove_rows(self, rows: Sequence[int]) -> None:
        raise NotImplementedError

    def _search(self, query: Matrix, k: int, rows: Sequence[int] | None) -> tuple[Matrix, npt.NDArray[np.int64]]:
        raise NotImplementedError

    # --- public ----------------------------------------------------------------------------------------
    @property
    def dimension(self) -> int | None:
        """The vector size, or None while the store is empty and was never written to."""
        return self._dim

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(documents={len(self._ids)}, dimension={self._dim})"

    def _write_vectors(self, batch: EmbeddedTexts) -> list[str]:
        return self.add_vectors(batch.texts, batch.vectors, metadatas=batch.metadatas, ids=batch.ids)

    def add_vectors(
        self,
        texts: Sequence[str],
        vectors: Sequence[Sequence[float]] | Matrix,
        *,
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        ids: Sequence[str | None] | None = None,
    ) -> list[str]:
        """Add already-embedded texts (see `add_texts`); an id that is already stored is replaced."""
        count = len(texts)
        new_ids = assign_ids(count, ids, metadatas)
        docs = [
            Document(page_content=text, metadata=dict(metadatas[n]) if metadatas else {})
            for n, text in enumerate(texts)
        ]
        # The last occurrence of a repeated id wins, as if the items had been added one after another.
        last = {doc_id: n for n, doc_id in enumerate(new_ids)}
        keep = sorted(last.values())
        with self._lock:
            matrix = to_matrix(vectors, dim=self._dim, what=f"{count} texts")
            if matrix.shape[0] != count:
                raise UserError(f"Got {count} texts but {matrix.shape[0]} vectors. Pass one vector per text.")
            matrix = normalise(matrix[keep] if len(keep) != count else matrix)
            self._delete_ids(list(last))
            if self._dim is None:
                self._dim = int(matrix.shape[1])
            self._append(matrix)
            for n in keep:
                self._rows[new_ids[n]] = len(self._ids)
                self._ids.append(new_ids[n])
                self._docs.append(docs[n])
        return new_ids

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete documents by id; unknown ids are ignored. ``ids=None`` deletes everything.

        Returns:
            True.
        """
        with self._lock:
            self._delete_ids(list(self._ids) if ids is None else ids)
        return True

    def _delete_ids(self, ids: Iterable[str]) -> None:
        rows = sorted({self._rows[i] for i in ids if i in self._rows})
        if not rows:
            return
        self._remove_rows(rows)
        gone = set(rows)
        self._ids = [doc_id for n, doc_id in enumerate(self._ids) if n not in gone]
        self._docs = [doc for n, doc in enumerate(self._docs) if n not in gone]
        self._rows = {doc_id: n for n, doc_id in enumerate(self._ids)}

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents for ``ids``, in that order; unknown ids are skipped."""
        with self._lock:
            return [self._document(self._rows[i]) for i in ids if i in self._rows]

    def _document(self, row: int) -> Document:
        doc = self._docs[row]
        return Document(page_content=doc.page_content, metadata=dict(doc.metadata), id=self._ids[row])

    def similarity_search(self, query: str, k: int = 4, filter: Filter | None = None, **kwargs: Any) -> list[Document]:
        """The ``k`` documents most similar to ``query`` (cosine), optionally filtered by metadata.

        Args:
            query: the search text (embedded with ``embed_query``).
            k: how many documents to return at most.
            filter: metadata containment (``{"company_id": "a"}``: every key present and equal; a key no
                document has gives an empty result) or a function ``Document -> bool``.
            **kwargs: ignored.
        """
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter=filter)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Filter | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Like `similarity_search`, with the cosine similarity of each document."""
        if not self._ids:
            return []
        return self.similarity_search_by_vector_with_score(self._embedding.embed_query(query), k, filter=filter)

    def similarity_search_by_vector(
        self, embedding: Sequence[float], k: int = 4, filter: Filter | None = None, **kwargs: Any
    ) -> list[Document]:
        """Like `similarity_search` for an already-embedded query."""
        return [doc for doc, _ in self.similarity_search_by_vector_with_score(embedding, k, filter=filter)]

    def similarity_search_by_vector_with_score(
        self, embedding: Sequence[float] | Matrix, k: int = 4, filter: Filter | None = None
    ) -> list[tuple[Document, float]]:
        """Documents and cosine similarities for an already-embedded query.

        Raises:
            UserError: ``filter`` has an unsupported type or the query vector has the wrong size.
        """
        _check_filter(filter)
        with self._lock:
            if not self._ids or k < 1:
                return []
            # Ranking does not depend on the query's length, so only the k returned scores are divided by it.
            query = to_matrix(embedding, dim=self._dim, what="the query")
            rows: list[int] | None = None
            if isinstance(filter, Mapping):  # compared in place: no per-row copies
                rows = [n for n, doc in enumerate(self._docs) if matches_filter(doc.metadata, filter)]
            elif filter is not None:  # a caller's function gets copies, so it cannot change the store
                rows = [n for n in range(len(self._docs)) if filter(self._document(n))]
            if rows is not None and not rows:
                return []
            scores, found = self._search(query, min(k, len(rows) if rows is not None else len(self._ids)), rows)
            norm = float(np.sqrt(np.dot(query[0], query[0]))) or 1.0
            # float32 rounding lets a vector's similarity to itself come out a hair above 1 (more often with some
            # BLAS kernels than others); a cosine and the relevance made from it stay within their ranges.
            return [
                (self._document(row), min(1.0, max(-1.0, score / norm)))
                for score, row in zip(scores.tolist(), found.tolist(), strict=True)
                if row >= 0
            ]

    @classmethod
    def from_texts(
        cls: type[StoreT],
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> StoreT:
        """Build a store from texts (LangChain's constructor protocol)."""
        store = cls(embedding)
        store.add_texts(texts, metadatas, ids=list(ids) if ids is not None else None, **kwargs)
        return store

    @classmethod
    def from_data(
        cls: type[StoreT], data: Any, *, embeddings: Embeddings | None, progress: bool | None, caller: str
    ) -> StoreT:
        """A new store holding ``data`` (what `create_ram_vector_store` and `create_faiss_store` do).

        Args:
            data: strings, `Document`s or ``{page_content, metadata}`` mappings (see `turn_to_docs`); ids are kept.
            embeddings: the embedding model; default: the offline local model (`get_embeddings("local")`).
            progress: show a progress bar while embedding (default: for large ingests on a terminal or in Jupyter).
            caller: the public function, named in the error for empty data.

        Raises:
            UserError: ``data`` is empty or holds an unsupported item.
        """
        docs = non_empty_docs(data, caller=caller)
        store = cls(resolve_embeddings(embeddings))
        store.add_documents(docs, progress=progress)
        return store
