"""Embedding in batches, with a rich progress bar for large interactive ingests."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings

__all__ = ["PROGRESS_THRESHOLD", "embed_texts", "show_progress"]

PROGRESS_THRESHOLD = 256
"""With ``progress=None`` a bar is shown from this many documents on, and only on a terminal."""
_BATCH = 64


def show_progress(progress: bool | None, count: int) -> bool:
    """Whether to draw a bar: ``progress`` if given, else only for big ingests on an interactive stderr."""
    if progress is not None:
        return progress
    return count >= PROGRESS_THRESHOLD and sys.stderr.isatty()


def embed_texts(embedding: Embeddings, texts: Sequence[str], *, progress: bool | None) -> list[list[float]]:
    """Embed ``texts`` (passages); with a progress bar when `show_progress` says so and rich is installed."""
    if not show_progress(progress, len(texts)):
        return [list(vector) for vector in embedding.embed_documents(list(texts))]
    bar = _rich_progress()
    if bar is None:
        return [list(vector) for vector in embedding.embed_documents(list(texts))]
    vectors: list[list[float]] = []
    with bar:
        task = bar.add_task("Embedding documents", total=len(texts))
        for start in range(0, len(texts), _BATCH):
            batch = list(texts[start : start + _BATCH])
            vectors.extend(list(vector) for vector in embedding.embed_documents(batch))
            bar.advance(task, len(batch))
    return vectors


def _rich_progress() -> Any:
    try:
        from rich.progress import Progress
    except ImportError:  # rich comes with the `server` extra; without it ingest runs silently
        return None
    from rich.console import Console

    return Progress(console=Console(file=sys.stderr), transient=True)
