"""`SupabaseVectorStore`: documents in a Supabase (Postgres + pgvector) table over PostgREST (extra ``supabase``).

The table and its match function come from `supabase_documents_sql` (the shipped
``supabase_documents.sql``): ``id text``, ``content``, ``metadata jsonb``, ``embedding vector(n)``, an HNSW
cosine index and ``match_documents(query_embedding, match_count, filter jsonb)`` that keeps rows whose
metadata contains ``filter`` (``metadata @> filter``). A filter key no row has therefore gives an empty
result, never another tenant's rows.

Writes are upserts on ``id`` in batches, so re-adding the same ids is idempotent and a failed ingest can
be repeated. Async methods run the sync ones in LangChain's executor (supabase-py's client is sync).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ai_utils._optional import missing_extra
from ai_utils.exceptions import AiUtilsError, UserError
from ai_utils.rag._store import EmbeddedTexts, EmbeddingVectorStore
from ai_utils.rag._supabase_errors import SupabaseVectorStoreError, store_error
from ai_utils.rag._supabase_sql import check_identifier, supabase_documents_sql
from ai_utils.rag.documents import non_empty_docs
from ai_utils.rag.embeddings import resolve_embeddings

try:
    import httpx
    from postgrest import APIError
    from postgrest.types import ReturnMethod
    from supabase import Client, ClientOptions, create_client
except ImportError as _import_error:
    raise missing_extra("supabase", extra="supabase", feature="the Supabase vector store") from _import_error

__all__ = [
    "SupabaseVectorStore",
    "SupabaseVectorStoreError",
    "create_supabase_vector_store",
    "get_supabase_vector_store",
    "supabase_documents_sql",
]

_IDS_PER_QUERY = 100  # keeps `in.(...)` query strings well below URL length limits


def _client_from_env() -> Client:
    url = os.environ.get("SUPABASE_URL") or os.environ.get("NEXT_PUBLIC_SUPABASE_URL")
    key = os.environ.get("SUPABASE_SERVICE_ROLE_KEY") or os.environ.get("SUPABASE_KEY")
    if not url or not key:
        raise UserError(
            "No Supabase client given and SUPABASE_URL (or NEXT_PUBLIC_SUPABASE_URL) and SUPABASE_SERVICE_ROLE_KEY "
            "(or SUPABASE_KEY) are not both set. Pass client=supabase.create_client(url, key) or set them."
        )
    return create_client(url, key, options=ClientOptions(httpx_client=httpx.Client(timeout=60)))


def _close_env_client(client: Client) -> None:
    """Close the HTTP client that `_client_from_env` made, when the store that would have owned it is not returned.

    Without this a failed ingest leaves a pooled keep-alive socket open until garbage collection.
    """
    http = client.options.httpx_client
    if http is not None:
        http.close()


class SupabaseVectorStore(EmbeddingVectorStore):
    """A LangChain `VectorStore` over a Supabase table and its match RPC (see `supabase_documents_sql`).

    Example:
        ```python
        store = get_supabase_vector_store(client=client, filter={"company_id": "company-1"})
        store.similarity_search("Wann beginnt die Frühschicht?")
        ```

    Args:
        client: a supabase-py ``Client`` (service role key for writes under RLS).
        embedding: the embedding model; its vector size must match the table's ``vector(n)``.
        table_name: the documents table.
        rpc_function: the match function.
        filter: the default ``filter`` for searches that pass none (e.g. the tenant).
        upsert_batch_size: rows per upsert request.
    """

    def __init__(
        self,
        client: Client,
        embedding: Embeddings,
        *,
        table_name: str = "documents",
        rpc_function: str = "match_documents",
        filter: Mapping[str, Any] | None = None,
        upsert_batch_size: int = 500,
    ) -> None:
        if isinstance(upsert_batch_size, bool) or not isinstance(upsert_batch_size, int) or upsert_batch_size < 1:
            raise UserError(f"upsert_batch_size must be an int >= 1, got {upsert_batch_size!r}. Pass e.g. 500.")
        self.client = client
        self._embedding = embedding
        self.table_name = check_identifier(table_name, "table_name", "documents")
        self.rpc_function = check_identifier(rpc_function, "rpc_function", "match_documents")
        self.filter = _check_filter(filter)
        self.upsert_batch_size = upsert_batch_size

    def __repr__(self) -> str:
        return f"SupabaseVectorStore(table_name={self.table_name!r}, rpc_function={self.rpc_function!r})"

    def _error(self, error: APIError, action: str, written: Sequence[str] = ()) -> AiUtilsError:
        return store_error(error, action, table_name=self.table_name, rpc_function=self.rpc_function, written=written)

    # --- writes ----------------------------------------------------------------------------------------
    def _write_vectors(self, batch: EmbeddedTexts) -> list[str]:
        """Upsert in batches of ``upsert_batch_size``; a failed batch raises naming the ids already written."""
        rows: dict[str, dict[str, Any]] = {}  # a repeated id keeps its last row (Postgres refuses duplicates)
        for n, (doc_id, text, vector) in enumerate(zip(batch.ids, batch.texts, batch.vectors, strict=True)):
            metadata = dict(batch.metadatas[n]) if batch.metadatas else {}
            rows[doc_id] = {
                "id": doc_id,
                "content": text,
                "metadata": metadata,
                "embedding": [float(x) for x in vector],
            }
        self._upsert(list(rows.values()))
        return batch.ids

    def _upsert(self, rows: list[dict[str, Any]]) -> None:
        written: list[str] = []
        for start in range(0, len(rows), self.upsert_batch_size):
            batch = rows[start : start + self.upsert_batch_size]
            try:
                self.client.table(self.table_name).upsert(
                    batch, on_conflict="id", returning=ReturnMethod.minimal
                ).execute()
            except APIError as error:
                raise self._error(error, "writing documents", written) from error
            written.extend(row["id"] for row in batch)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete documents by id; unknown ids are ignored.

        Raises:
            UserError: ``ids`` is None (deleting a whole shared table is refused; truncate it in SQL).
        """
        if ids is None:
            raise UserError(
                f"delete() needs ids; refusing to empty the Supabase table {self.table_name!r}. "
                "Pass the ids, or run `truncate` in SQL."
            )
        for start in range(0, len(ids), _IDS_PER_QUERY):
            try:
                self.client.table(self.table_name).delete(returning=ReturnMethod.minimal).in_(
                    "id", list(ids[start : start + _IDS_PER_QUERY])
                ).execute()
            except APIError as error:
                raise self._error(error, "deleting documents") from error
        return True

    # --- reads -----------------------------------------------------------------------------------------
    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents for ``ids``, in that order; unknown ids are skipped."""
        found: dict[str, Document] = {}
        for start in range(0, len(ids), _IDS_PER_QUERY):
            try:
                response = (
                    self.client.table(self.table_name)
                    .select("id,content,metadata")
                    .in_("id", list(ids[start : start + _IDS_PER_QUERY]))
                    .execute()
                )
            except APIError as error:
                raise self._error(error, "reading documents") from error
            for row in cast(list[dict[str, Any]], response.data):
                found[row["id"]] = _document(row)
        return [found[i] for i in ids if i in found]

    def similarity_search(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` documents most similar to ``query``.

        Args:
            query: the search text.
            k: how many documents at most.
            filter: passed unchanged as the RPC's ``filter`` (metadata containment); default: the store's
                ``filter``, else ``{}``.
            **kwargs: ignored.
        """
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter=filter)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Like `similarity_search`, with the cosine similarity of each document."""
        return self.similarity_search_by_vector_with_score(self._embedding.embed_query(query), k, filter=filter)

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Like `similarity_search` for an already-embedded query."""
        return [doc for doc, _ in self.similarity_search_by_vector_with_score(embedding, k, filter=filter)]

    def similarity_search_by_vector_with_score(
        self, embedding: Sequence[float], k: int = 4, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float]]:
        """Call the match RPC with ``{query_embedding, match_count, filter}``.

        Raises:
            UserError: the RPC does not exist, or the query vector does not fit the table.
            SupabaseVectorStoreError: any other refusal.
        """
        chosen = _check_filter(filter) if filter is not None else self.filter
        params = {"query_embedding": list(embedding), "match_count": k, "filter": dict(chosen or {})}
        try:
            response = self.client.rpc(self.rpc_function, params).execute()
        except APIError as error:
            raise self._error(error, "the search") from error
        rows = cast(list[dict[str, Any]], response.data or [])
        return [(_document(row), float(row["similarity"])) for row in rows]

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        client: Client | None = None,
        **kwargs: Any,
    ) -> SupabaseVectorStore:
        """Build a store and add texts (LangChain's constructor protocol; ``client`` defaults from the env)."""
        store_client = _client_from_env() if client is None else client
        try:
            store = cls(store_client, embedding, **kwargs)
            store.add_texts(texts, metadatas, ids=list(ids) if ids is not None else None)
        except BaseException:
            if client is None:
                _close_env_client(store_client)
            raise
        return store


def _check_filter(filter: Any) -> Mapping[str, Any] | None:
    if filter is None or isinstance(filter, Mapping):
        return filter
    raise UserError(
        f"A Supabase filter must be a JSON mapping (matched as `metadata @> filter`), got {filter!r}. "
        "Pass e.g. filter={'company_id': 'company-1'}."
    )


def _document(row: Mapping[str, Any]) -> Document:
    return Document(page_content=row["content"], metadata=row.get("metadata") or {}, id=str(row["id"]))


def get_supabase_vector_store(
    *,
    embeddings: Embeddings | None = None,
    filter: Mapping[str, Any] | None = None,
    upsert_batch_size: int = 500,
    table_name: str = "documents",
    rpc_function: str = "match_documents",
    client: Client | None = None,
) -> SupabaseVectorStore:
    """Open an existing Supabase documents table as a vector store.

    Args:
        embeddings: the model the table was filled with; default: the offline local model (384 dims).
        filter: the default RPC ``filter`` for searches that pass none, e.g. ``{"company_id": "company-1"}``.
        upsert_batch_size: rows per upsert request.
        table_name: the documents table.
        rpc_function: the match function.
        client: a supabase-py ``Client``; default from ``SUPABASE_URL`` (or ``NEXT_PUBLIC_SUPABASE_URL``) and
            ``SUPABASE_SERVICE_ROLE_KEY`` (or ``SUPABASE_KEY``).

    Returns:
        The store.

    Raises:
        UserError: a bad argument, or no client and no environment settings.
    """
    return SupabaseVectorStore(
        client or _client_from_env(),
        resolve_embeddings(embeddings),
        table_name=table_name,
        rpc_function=rpc_function,
        filter=filter,
        upsert_batch_size=upsert_batch_size,
    )


def create_supabase_vector_store(
    data: Any,
    *,
    embeddings: Embeddings | None = None,
    table_name: str = "documents",
    rpc_function: str = "match_documents",
    client: Client | None = None,
    upsert_batch_size: int = 500,
    progress: bool | None = None,
) -> SupabaseVectorStore:
    """Embed documents into a Supabase table (created beforehand with `supabase_documents_sql`).

    Example:
        ```python
        store = create_supabase_vector_store(
            [{"page_content": "Die Frühschicht beginnt um 6 Uhr.", "metadata": {"company_id": "company-1"}}],
            embeddings=get_embeddings("openrouter"),
            table_name="mira_knowledge_chunks",
            rpc_function="match_mira_knowledge",
        )
        ```

    Args:
        data: strings, `Document`s or ``{page_content, metadata}`` mappings; metadata and ids are kept.
        embeddings: the embedding model; default: the offline local model (384 dims).
        table_name: the documents table.
        rpc_function: the match function.
        client: a supabase-py ``Client``; default from the environment (see `get_supabase_vector_store`).
        upsert_batch_size: rows per upsert request.
        progress: show a progress bar while embedding (default: for large ingests on a terminal or in Jupyter).

    Returns:
        The store.

    Raises:
        UserError: empty data, a missing table, or vectors that do not fit the table.
    """
    docs = non_empty_docs(data, caller="create_supabase_vector_store")
    store = get_supabase_vector_store(
        embeddings=embeddings,
        upsert_batch_size=upsert_batch_size,
        table_name=table_name,
        rpc_function=rpc_function,
        client=client,
    )
    try:
        store.add_documents(docs, progress=progress)
    except BaseException:
        if client is None:
            _close_env_client(store.client)
        raise
    return store
