"""Stateless chains: one prompt, one model call, optional validated output and retrieval context.

- `Chain`: prompt -> model (-> validated output), optionally grounded in a vector store.
- `create_rag_chain(vector_store=...)` / `DEFAULT_RAG_PROMPT`: a `Chain` that answers questions from retrieved context.
"""

from __future__ import annotations

from ai_utils.chains.chain import Chain
from ai_utils.chains.rag import DEFAULT_RAG_PROMPT, create_rag_chain

__all__ = ["DEFAULT_RAG_PROMPT", "Chain", "create_rag_chain"]
