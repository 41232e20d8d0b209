"""Embedding in batches, with a progress bar for large interactive ingests (terminal or Jupyter)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.embeddings import Embeddings

__all__ = ["PROGRESS_THRESHOLD", "embed_texts", "show_progress"]

PROGRESS_THRESHOLD = 256
"""With ``progress=None`` a bar is shown from this many documents on, on a terminal or in a notebook."""
_BATCH = 64
_LABEL = "Embedding documents"
_WIDTH = 30


class _Bar(Protocol):
    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: object) -> None: ...
    def advance(self, count: int) -> None: ...


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython with a kernel attached)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def show_progress(progress: bool | None, count: int) -> bool:
    """Whether to draw a bar: ``progress`` if given, else only for big ingests on a terminal or in a notebook."""
    if progress is not None:
        return progress
    return count >= PROGRESS_THRESHOLD and (sys.stderr.isatty() or _in_notebook())


def embed_texts(embedding: Embeddings, texts: Sequence[str], *, progress: bool | None) -> list[list[float]]:
    """Embed ``texts`` (passages); with a progress bar when `show_progress` says so."""
    bar = _bar(len(texts)) if show_progress(progress, len(texts)) else None
    if bar is None:
        return [list(vector) for vector in embedding.embed_documents(list(texts))]
    vectors: list[list[float]] = []
    with bar:
        for start in range(0, len(texts), _BATCH):
            batch = list(texts[start : start + _BATCH])
            vectors.extend(list(vector) for vector in embedding.embed_documents(batch))
            bar.advance(len(batch))
    return vectors


def _bar(total: int) -> _Bar | None:
    if _in_notebook():
        return _NotebookBar(total)
    try:
        return _RichBar(total)
    except ImportError:  # rich comes with the `server` extra; without it ingest runs silently
        return None


class _RichBar:
    """rich's bar on stderr, removed when done."""

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import Progress

        self._progress = Progress(console=Console(file=sys.stderr), transient=True)
        self._task = self._progress.add_task(_LABEL, total=total)

    def __enter__(self) -> _RichBar:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def advance(self, count: int) -> None:
        self._progress.advance(self._task, count)


class _NotebookBar:
    """One cell output updated in place, left at its last state.

    Written here because rich's and tqdm's notebook bars draw into ipywidgets, which a plain Jupyter (or
    nbclient) run may not have; an updatable ``display`` works in every frontend.
    """

    def __init__(self, total: int) -> None:
        self._total = max(total, 1)
        self._done = 0
        self._handle: Any = None

    def __enter__(self) -> _NotebookBar:
        from IPython.display import display

        self._handle = display(self._view(), display_id=True)  # type: ignore[no-untyped-call]  # IPython is untyped
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def advance(self, count: int) -> None:
        self._done = min(self._done + count, self._total)
        self._handle.update(self._view())

    def _view(self) -> Any:
        from IPython.display import Pretty

        filled = _WIDTH * self._done // self._total
        percent = 100 * self._done // self._total
        text = f"{_LABEL} {'█' * filled}{'░' * (_WIDTH - filled)} {self._done}/{self._total} {percent}%"
        return Pretty(text)  # type: ignore[no-untyped-call]  # IPython is untyped
