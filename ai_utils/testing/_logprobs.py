"""Token logprobs in the OpenAI Chat Completions shape, shared by `FakeOpenAIServer` and the fake chat models."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["check_logprobs", "first_token", "token_logprobs"]


def check_logprobs(logprobs: object, *, where: str) -> str | None:
    """Why ``logprobs`` is not a token -> log-probability mapping (values <= 0), or ``None`` when it is."""
    if not isinstance(logprobs, Mapping) or not logprobs:
        return f"{where} must be a non-empty mapping of token -> log-probability, got {logprobs!r}"
    for token, value in logprobs.items():
        if not isinstance(token, str) or isinstance(value, bool) or not isinstance(value, int | float):
            return f"{where} maps {token!r} to {value!r}; use str tokens and float log-probabilities"
        if math.isnan(value) or value > 0:
            return f"{where} gives {token!r} the log-probability {value!r}; log-probabilities are <= 0"
    return None


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def first_token(scripted: Mapping[str, float]) -> str:
    """The most likely scripted token (what a reply without ``content`` samples)."""
    return max(scripted, key=lambda token: scripted[token])


def token_logprobs(pieces: list[str], scripted: Mapping[str, float] | None, top: int) -> list[dict[str, Any]]:
    """``logprobs.content``: one entry per token; the first carries the scripted alternatives (best first, ``top``)."""
    entries: list[dict[str, Any]] = []
    for index, piece in enumerate(pieces):
        if index == 0 and scripted:
            best = sorted(scripted.items(), key=lambda item: -item[1])[:top]
            chosen = scripted.get(piece, max(scripted.values()))
            entries.append({**_entry(piece, chosen), "top_logprobs": [_entry(t, lp) for t, lp in best]})
        else:
            entries.append({**_entry(piece, 0.0), "top_logprobs": [_entry(piece, 0.0)] if top else []})
    return entries
