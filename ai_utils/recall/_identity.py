"""The embedding identity: provider, model and dimensions of the vectors a store's index holds.

Vectors of different models (or dimensions) are not comparable: a cosine between them is noise, not a weaker
match. So a namespace records the identity its vectors were made with, every item records the identity of its
own vector, and a `MemoryItemStore` whose store embeds with another identity is refused (`UserError`), never
silently compared (seed: "incompatible vectors are never compared").
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.store.base import BaseStore

from ai_utils.exceptions import UserError

__all__ = ["SemanticMode", "embedding_identity", "store_identity"]

SemanticMode = Literal["auto", "strict", "off"]


def _model_name(embeddings: Any) -> str:
    for attribute in ("model", "model_name", "deployment"):
        value = getattr(embeddings, attribute, None)
        if isinstance(value, str) and value:
            return value
    func = getattr(embeddings, "func", None) or getattr(embeddings, "afunc", None)  # langgraph's EmbeddingsLambda
    if func is not None:
        return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"
    size = getattr(embeddings, "size", None)  # langchain-core's fake embeddings
    return f"size={size}" if isinstance(size, int) else ""


def embedding_identity(embeddings: Any, dims: int | None) -> str:
    """``"<provider>|<model>|<dimensions>"`` of an embedding model (provider: its package and class)."""
    cls = type(embeddings)
    provider = f"{cls.__module__.split('.')[0]}.{cls.__qualname__}"
    return f"{provider}|{_model_name(embeddings)}|{dims if dims is not None else '?'}"


def store_identity(store: BaseStore) -> str | None:
    """The identity of ``store``'s index, or ``None`` when it has no index (no semantic search)."""
    config = getattr(store, "index_config", None)
    embeddings = getattr(store, "embeddings", None)
    if not config or embeddings is None:
        return None
    dims = config.get("dims") if isinstance(config, dict) else None
    return embedding_identity(embeddings, dims if isinstance(dims, int) else None)


def resolve_identity(store: BaseStore, embeddings: Any, semantic: object) -> str | None:
    """The identity semantic search uses, checked against the constructor's arguments.

    Raises:
        UserError: an unknown mode; ``embeddings`` of another identity than the store's index; ``embeddings``
            for a store without an index; ``"strict"`` without an index.
    """
    if semantic not in ("auto", "strict", "off"):
        raise UserError(f"`semantic` must be 'auto', 'strict' or 'off', got {semantic!r}.")
    identity = store_identity(store)
    if embeddings is not None:
        if identity is None:
            raise UserError(
                "`embeddings` was given, but the store has no vector index, and memory search uses the store's own "
                "index. Create the store with it: InMemoryStore(index={'dims': <dimensions>, 'embed': embeddings, "
                "'fields': ['content']}) (PostgresStore/SqliteStore take the same `index=`), and leave "
                "`embeddings` out or pass the same model."
            )
        dims = identity.rsplit("|", 1)[1]
        given = embedding_identity(embeddings, int(dims) if dims.isdigit() else None)
        if given != identity and embeddings is not getattr(store, "embeddings", None):
            raise UserError(
                f"`embeddings` ({given!r}) is not the model of the store's index ({identity!r}); vectors of "
                "different models are never compared. Pass the model the store's index embeds with, or leave "
                "`embeddings` out."
            )
    if semantic == "strict" and identity is None:
        raise UserError(
            "semantic='strict' needs a store with a vector index: create it with index={'dims': ..., 'embed': ..., "
            "'fields': ['content']}, or use semantic='auto' (lexical when there is no index) or 'off'."
        )
    return None if semantic == "off" else identity
