"""Pure ranking: the lexical index of an item, BM25 over the candidates, reciprocal rank fusion, token budgets.

`BaseStore` has no lexical search (its ``query`` is semantic only), so each item stores its terms
(``{"term": count}``) when written and lexical ranking happens here over the items a scope holds. The two
rankings are fused by rank, never by score: ``1 / (60 + rank)`` summed over the rankings an item is in
(reciprocal rank fusion, Cormack et al. 2009), so a cosine similarity is never added to a BM25 score.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

__all__ = ["RRF_K", "bm25_ranking", "fuse", "item_tokens", "query_terms", "terms_of"]

RRF_K = 60
"""The reciprocal-rank-fusion constant (the value of the original paper, and of the seed)."""

_WORD = re.compile(r"\w+")
# Words that would make nearly every item a lexical candidate; BM25 would weigh them low anyway, but a
# candidate in the lexical list takes a fused rank.
_STOP = frozenset(
    "a an and are as at be but by for from has have i in is it its me my of on or our so that the their them "
    "they this to was we were what when where which who will with you your".split()
)
_K1 = 1.2
_B = 0.75
_MAX_TERMS = 2_000

K = TypeVar("K", bound=Hashable)


def _stem(word: str) -> str:
    # A light plural fold ("answers" -> "answer"), nothing language-specific beyond that.
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [_stem(w) for w in _WORD.findall(folded) if w not in _STOP]


def terms_of(text: str) -> tuple[dict[str, int], int]:
    """The lexical index of ``text``: term counts (at most 2,000 distinct terms) and the number of words."""
    words = _words(text)
    counts = Counter(words)
    if len(counts) > _MAX_TERMS:
        counts = Counter(dict(counts.most_common(_MAX_TERMS)))
    return dict(counts), len(words)


def query_terms(query: str) -> list[str]:
    """The distinct terms of a query, in order."""
    return list(dict.fromkeys(_words(query)))


def bm25_ranking(matched: Sequence[tuple[K, Mapping[str, int], int]], *, total: int, length_sum: int) -> list[K]:
    """Keys of the matching documents, best BM25 score first (ties: input order).

    Args:
        matched: ``(key, {query term: count}, length)`` of each document holding a query term.
        total: how many documents the corpus has (matching or not), for the idf.
        length_sum: their summed lengths, for the length normalisation.
    """
    if not matched:
        return []
    df: Counter[str] = Counter()
    for _, hits, _ in matched:
        df.update(hits.keys())
    average = length_sum / total if total else 1.0
    idf = {t: math.log(1 + (total - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    scored = []
    for index, (key, hits, length) in enumerate(matched):
        norm = _K1 * (1 - _B + _B * length / (average or 1.0))
        score = sum(idf[t] * n * (_K1 + 1) / (n + norm) for t, n in hits.items())
        scored.append((-score, index, key))
    scored.sort(key=lambda row: (row[0], row[1]))
    return [key for _, _, key in scored]


def fuse(rankings: Sequence[Sequence[K]], *, k: int = RRF_K) -> list[K]:
    """Reciprocal rank fusion: every key scored ``sum(1 / (k + rank))`` over the rankings it is in (rank from 1).

    Ties keep the order of first appearance (earlier ranking, then higher rank), so the result is deterministic.
    """
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    order = {key: i for i, key in enumerate(scores)}
    return sorted(scores, key=lambda key: (-scores[key], order[key]))


def item_tokens(content: str) -> int:
    """Approximate tokens an item costs in a prompt: characters / 4 of its content, plus its line's overhead."""
    return -(-len(content) // 4) + 6
