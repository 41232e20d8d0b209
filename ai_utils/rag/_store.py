"""The base of every vector store in `ai_utils.rag`: one embedding model, upserting ``add_texts``, cosine relevance.

`add_texts` checks the ids, embeds the texts (in batches, with a progress bar for large ingests) and hands
the vectors to the store's `_write_vectors`; the in-process stores keep them in a matrix, the Supabase
store upserts them over PostgREST. Every store scores by cosine similarity, so relevance is
``(cosine + 1) / 2``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from ai_utils.rag._progress import embed_texts
from ai_utils.rag.documents import assign_ids

__all__ = ["EmbeddedTexts", "EmbeddingVectorStore"]


class EmbeddedTexts(NamedTuple):
    """Texts ready to store: one vector, metadata (or none) and checked id per text."""

    texts: Sequence[str]
    vectors: Sequence[Sequence[float]]
    metadatas: Sequence[Mapping[str, Any]] | None
    ids: list[str]


class EmbeddingVectorStore(VectorStore):
    """A `VectorStore` that embeds with ``self._embedding`` and upserts by id (subclasses write the vectors)."""

    _embedding: Embeddings

    def _write_vectors(self, batch: EmbeddedTexts) -> list[str]:
        raise NotImplementedError

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model this store embeds texts and queries with."""
        return self._embedding

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Embed and add texts; an id that is already stored is replaced (upsert), so re-adding is idempotent.

        Args:
            texts: the texts.
            metadatas: one metadata dict per text.
            ids: one id per text (None entries get a new uuid4).
            **kwargs: ``progress=True/False`` shows or hides a progress bar (default: for large ingests on a
                terminal or in Jupyter); anything else is ignored.

        Returns:
            The ids, in order.

        Raises:
            UserError: lengths differ, or the vectors do not fit the store (see the store's own errors).
        """
        texts = list(texts)
        if not texts:
            return []
        new_ids = assign_ids(len(texts), ids, metadatas)  # checked before the embedding calls are paid for
        vectors = embed_texts(self._embedding, texts, progress=kwargs.get("progress"))
        return self._write_vectors(EmbeddedTexts(texts, vectors, metadatas, new_ids))

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda score: (score + 1.0) / 2.0
