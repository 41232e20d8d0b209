from __future__ import annotations

import sys

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from ai_utils.rag._progress import PROGRESS_THRESHOLD, embed_texts, show_progress
from ai_utils.rag.memory_store import MemoryVectorStore


class CountingEmbedding(DeterministicFakeEmbedding):
    batches: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        return super().embed_documents(texts)


def test_progress_is_off_by_default_when_stderr_is_not_a_terminal() -> None:
    assert sys.stderr.isatty() is False
    assert show_progress(None, PROGRESS_THRESHOLD * 4) is False
    assert show_progress(True, 1) is True
    assert show_progress(False, 10_000) is False


def test_progress_on_a_terminal_only_for_big_ingests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)

    assert show_progress(None, PROGRESS_THRESHOLD) is True
    assert show_progress(None, PROGRESS_THRESHOLD - 1) is False


def test_a_shown_progress_bar_embeds_in_batches_with_the_same_vectors() -> None:
    texts = [f"Dokument {n}" for n in range(300)]
    model = CountingEmbedding(size=4, batches=[])  # type: ignore[call-arg]

    with_bar = embed_texts(model, texts, progress=True)

    assert model.batches == [64, 64, 64, 64, 44]
    assert with_bar == embed_texts(model, texts, progress=False)
    assert model.batches[-1] == 300


def test_without_rich_a_requested_bar_falls_back_to_a_silent_ingest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich.progress", None)
    model = CountingEmbedding(size=4, batches=[])  # type: ignore[call-arg]
    store = MemoryVectorStore(model)

    store.add_texts([f"Dokument {n}" for n in range(300)], progress=True)

    assert model.batches == [300]
    assert len(store) == 300
