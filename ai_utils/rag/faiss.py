"""`FaissVectorStore`: FAISS ``IndexFlatIP`` with ids, upserts, metadata filters and save/load (extra ``faiss``).

LangChain-community's FAISS wrapper fails 6 of the 25 ``VectorStoreIntegrationTests`` (idempotent add by
id, update by id, delete of a missing id); this one keeps its own id ↔ row map and passes them all.
Vectors are unit-normalised, so the inner product is cosine similarity. Single queries run FAISS with one
OpenMP thread (with the default two a query was about 2x slower): the first search in a thread calls
``faiss.omp_set_num_threads(1)`` for that thread; call it again with another count after that to change it.

Saved stores are a directory with ``index.faiss`` and ``documents.json`` (ids, texts, metadata; JSON, not
pickle, so loading a store cannot run code).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ai_utils._optional import missing_extra
from ai_utils.exceptions import UserError
from ai_utils.rag._array_store import ArrayVectorStore, Matrix
from ai_utils.rag._numpy import np, npt
from ai_utils.rag.embeddings import resolve_embeddings

try:
    import faiss
except ImportError as _import_error:
    raise missing_extra("faiss-cpu", extra="faiss", feature="the FAISS vector store") from _import_error

__all__ = ["FaissVectorStore", "create_faiss_store", "load_faiss_store"]

_INDEX_FILE = "index.faiss"
_DOCS_FILE = "documents.json"
_FORMAT = "ai_utils.faiss/1"
_thread = threading.local()


class FaissVectorStore(ArrayVectorStore):
    """A LangChain `VectorStore` over ``faiss.IndexFlatIP`` (exact cosine search), with ``save_local``.

    Example:
        ```python
        store = create_faiss_store(["Release Notes 2026-04", "Known Issues"])
        store.save_local("faq_index")
        same = load_faiss_store("faq_index")
        ```

    Args:
        embedding: the embedding model for texts and queries.
    """

    def _reset(self) -> None:
        self._index: Any = None

    @property
    def index(self) -> Any:
        """The underlying ``faiss.IndexFlatIP`` (None before the first document)."""
        return self._index

    def _append(self, vectors: Matrix) -> None:
        if self._index is None:
            self._index = faiss.IndexFlatIP(int(vectors.shape[1]))
        self._index.add(vectors)

    def _remove_rows(self, rows: Sequence[int]) -> None:
        self._index.remove_ids(np.asarray(rows, dtype=np.int64))  # compacts, keeping the order of the rest

    def _search(self, query: Matrix, k: int, rows: Sequence[int] | None) -> tuple[Matrix, npt.NDArray[np.int64]]:
        selector = None if rows is None else faiss.IDSelectorBatch(np.asarray(rows, dtype=np.int64))
        params = None if selector is None else faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
        if not getattr(_thread, "single", False):
            # OpenMP's thread count is per calling thread; switching it back and forth per query costs more
            # than the query, so the searching thread stays at one.
            faiss.omp_set_num_threads(1)
            _thread.single = True
        scores, found = self._index.search(query, k, params=params)
        return scores[0], found[0]

    def save_local(self, path: str | Path) -> None:
        """Write the store to the directory ``path`` (created if needed); read it back with `load_faiss_store`.

        Raises:
            UserError: the store is empty, or a metadata value is not JSON-serialisable.
        """
        with self._lock:
            if self._index is None or not self._ids:
                raise UserError(
                    f"This FAISS store is empty; there is nothing to save to {str(path)!r}. Add documents first."
                )
            records = [
                {"id": doc_id, "page_content": doc.page_content, "metadata": doc.metadata}
                for doc_id, doc in zip(self._ids, self._docs, strict=True)
            ]
            try:
                payload = json.dumps(
                    {"format": _FORMAT, "dimension": self._dim, "documents": records}, ensure_ascii=False
                )
            except TypeError as error:
                raise UserError(
                    f"Cannot save the FAISS store: {error}. Store only JSON values (str, int, float, bool, None, "
                    "lists, dicts) in document metadata."
                ) from error
            target = Path(path)
            target.mkdir(parents=True, exist_ok=True)
            faiss.write_index(self._index, str(target / _INDEX_FILE))
            (target / _DOCS_FILE).write_text(payload, encoding="utf-8")

    @classmethod
    def load_local(cls, path: str | Path, embedding: Embeddings) -> FaissVectorStore:
        """Read a store written by `save_local` (see `load_faiss_store`)."""
        source = Path(path)
        try:
            payload = json.loads((source / _DOCS_FILE).read_text(encoding="utf-8"))
            index = faiss.read_index(str(source / _INDEX_FILE))
        except (FileNotFoundError, RuntimeError, json.JSONDecodeError) as error:
            raise UserError(
                f"No FAISS store saved at {str(path)!r} ({error}). Pass the directory given to `store.save_local(...)`."
            ) from error
        if (
            not isinstance(payload, dict)
            or payload.get("format") != _FORMAT
            or index.ntotal != len(payload["documents"])
        ):
            raise UserError(
                f"{str(path)!r} does not hold a FAISS store saved by ai_utils. Save it with `store.save_local`."
            )
        store = cls(embedding)
        store._index = index
        store._dim = int(index.d)
        for row, record in enumerate(payload["documents"]):
            store._ids.append(record["id"])
            store._docs.append(Document(page_content=record["page_content"], metadata=record["metadata"]))
            store._rows[record["id"]] = row
        return store


def create_faiss_store(
    data: Any, *, embeddings: Embeddings | None = None, progress: bool | None = None
) -> FaissVectorStore:
    """Build a FAISS vector store from documents (the `FaissVectorStore` docstring shows it with save and load).

    ``data``, ``embeddings`` and ``progress`` are as for `create_ram_vector_store` (strings, `Document`s or
    ``{page_content, metadata}`` mappings; the offline local model by default); ids are kept.

    Returns:
        The store (save it with ``store.save_local(path)``).

    Raises:
        UserError: ``data`` is empty or holds an unsupported item.
    """
    return FaissVectorStore.from_data(data, embeddings=embeddings, progress=progress, caller="create_faiss_store")


def load_faiss_store(path: str | Path, *, embeddings: Embeddings | None = None) -> FaissVectorStore:
    """Load a FAISS store saved with ``store.save_local(path)``.

    Use the embedding model the store was built with; a model with another vector size is refused at the
    first query or add (`UserError`).

    Args:
        path: the directory given to ``save_local``.
        embeddings: the embedding model; default: the offline local model.

    Returns:
        The store, with its ids and metadata.

    Raises:
        UserError: ``path`` holds no saved store.
    """
    return FaissVectorStore.load_local(path, resolve_embeddings(embeddings))
