"""Stateless chains: one prompt, one model call, optional validated output and retrieval context."""

from __future__ import annotations

from ai_utils.chains.chain import Chain

__all__ = ["Chain"]
