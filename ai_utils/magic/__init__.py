"""Magic funcs: extract, structure, rewrite and summarize data with one call (each with an async twin)."""

from __future__ import annotations

from ai_utils.magic.funcs import (
    aextract,
    arewrite,
    astructure,
    asummarize,
    extract,
    rewrite,
    structure,
    summarize,
)

__all__ = ["aextract", "arewrite", "astructure", "asummarize", "extract", "rewrite", "structure", "summarize"]
