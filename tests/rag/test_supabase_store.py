from __future__ import annotations

import gc
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from _supabase import SupabaseStack
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import VectorStoreIntegrationTests
from supabase import Client

from ai_utils.exceptions import UserError
from ai_utils.rag.supabase import (
    SupabaseVectorStore,
    SupabaseVectorStoreError,
    create_supabase_vector_store,
    get_supabase_vector_store,
    supabase_documents_sql,
)

SUITE_TABLE = "rag_suite_docs"
TENANT_TABLE = "rag_tenant_docs"


@pytest.fixture(scope="module")
def rag_tables(supabase_stack: SupabaseStack) -> SupabaseStack:
    sql = supabase_documents_sql(SUITE_TABLE, rpc_function="match_rag_suite_docs", dimension=6)
    sql += supabase_documents_sql(TENANT_TABLE, rpc_function="match_rag_tenant_docs", dimension=8)
    supabase_stack.run_sql(sql, wait_for=SUITE_TABLE)
    supabase_stack.wait_for_table(TENANT_TABLE)
    return supabase_stack


def truncate(stack: SupabaseStack, table: str) -> None:
    with psycopg.connect(stack.db_uri, autocommit=True) as conn:
        conn.execute(f"truncate {table}")


def row_count(stack: SupabaseStack, table: str) -> int:
    with psycopg.connect(stack.db_uri, autocommit=True) as conn:
        row = conn.execute(f"select count(*) from {table}").fetchone()
    assert row is not None
    return int(row[0])


class TestSupabaseVectorStoreConformance(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, rag_tables: SupabaseStack, supabase_client: Client) -> Iterator[VectorStore]:  # type: ignore[override]
        truncate(rag_tables, SUITE_TABLE)
        yield SupabaseVectorStore(
            supabase_client, self.get_embeddings(), table_name=SUITE_TABLE, rpc_function="match_rag_suite_docs"
        )


@pytest.fixture
def tenant_store(rag_tables: SupabaseStack, supabase_client: Client) -> SupabaseVectorStore:
    truncate(rag_tables, TENANT_TABLE)
    return get_supabase_vector_store(
        embeddings=DeterministicFakeEmbedding(size=8),
        table_name=TENANT_TABLE,
        rpc_function="match_rag_tenant_docs",
        client=supabase_client,
        upsert_batch_size=3,
    )


def tenant_docs() -> list[dict[str, Any]]:
    return [
        {"page_content": f"Schichtplan {n}", "metadata": {"company_id": "company-a" if n < 4 else "company-b", "n": n}}
        for n in range(8)
    ]


def test_tenant_a_never_sees_tenant_b_rows(tenant_store: SupabaseVectorStore) -> None:
    tenant_store.add_documents([Document(**d) for d in tenant_docs()])

    found = tenant_store.similarity_search("Schichtplan 5", k=8, filter={"company_id": "company-a"})

    assert sorted(d.metadata["n"] for d in found) == [0, 1, 2, 3]
    assert all(d.metadata["company_id"] == "company-a" for d in found)


def test_store_default_filter_applies_when_the_search_passes_none(
    tenant_store: SupabaseVectorStore, supabase_client: Client
) -> None:
    tenant_store.add_documents([Document(**d) for d in tenant_docs()])
    scoped = get_supabase_vector_store(
        embeddings=tenant_store.embeddings,
        table_name=TENANT_TABLE,
        rpc_function="match_rag_tenant_docs",
        client=supabase_client,
        filter={"company_id": "company-b"},
    )

    assert sorted(d.metadata["n"] for d in scoped.similarity_search("Schichtplan", k=8)) == [4, 5, 6, 7]
    assert [d.metadata["n"] for d in scoped.similarity_search("Schichtplan", k=8, filter={"n": 1})] == [1]


def test_filter_on_a_key_no_row_has_gives_an_empty_result(tenant_store: SupabaseVectorStore) -> None:
    tenant_store.add_documents([Document(**d) for d in tenant_docs()])

    assert tenant_store.similarity_search("Schichtplan", k=8, filter={"compnay_id": "company-a"}) == []


def test_create_writes_in_batches_keeping_metadata_and_ids(rag_tables: SupabaseStack, supabase_client: Client) -> None:
    truncate(rag_tables, TENANT_TABLE)
    docs = [{"page_content": f"Text {n}", "metadata": {"n": n}, "id": f"id-{n}"} for n in range(7)]

    store = create_supabase_vector_store(
        docs,
        embeddings=DeterministicFakeEmbedding(size=8),
        table_name=TENANT_TABLE,
        rpc_function="match_rag_tenant_docs",
        client=supabase_client,
        upsert_batch_size=2,
    )

    assert row_count(rag_tables, TENANT_TABLE) == 7
    assert store.get_by_ids(["id-6", "id-0"]) == [
        Document(page_content="Text 6", metadata={"n": 6}, id="id-6"),
        Document(page_content="Text 0", metadata={"n": 0}, id="id-0"),
    ]
    (best, score), *_ = store.similarity_search_with_score("Text 3", k=2)
    assert (best.id, score) == ("id-3", pytest.approx(1.0, abs=1e-5))


def test_vectors_of_another_dimension_are_refused_and_nothing_is_written(
    rag_tables: SupabaseStack, supabase_client: Client
) -> None:
    truncate(rag_tables, TENANT_TABLE)

    with pytest.raises(UserError, match=r"do not fit table 'rag_tenant_docs'.*Nothing was written"):
        create_supabase_vector_store(
            ["eins", "zwei"],
            embeddings=DeterministicFakeEmbedding(size=6),
            table_name=TENANT_TABLE,
            rpc_function="match_rag_tenant_docs",
            client=supabase_client,
        )

    assert row_count(rag_tables, TENANT_TABLE) == 0


def test_a_failure_after_some_batches_says_which_rows_were_written(
    rag_tables: SupabaseStack, tenant_store: SupabaseVectorStore
) -> None:
    with pytest.raises(SupabaseVectorStoreError, match=r"3 documents were written before the failure") as caught:
        tenant_store.add_texts(["a", "b", "c", "bad\x00text"], ids=["1", "2", "3", "4"])

    assert caught.value.written_ids == ["1", "2", "3"]
    assert row_count(rag_tables, TENANT_TABLE) == 3


def test_query_with_another_dimension_is_a_user_error(tenant_store: SupabaseVectorStore) -> None:
    tenant_store.add_texts(["eins"])

    with pytest.raises(UserError, match="do not fit table"):
        tenant_store.similarity_search_by_vector([0.1] * 6)


def test_a_missing_rpc_function_is_a_user_error_naming_the_sql_helper(
    rag_tables: SupabaseStack, supabase_client: Client
) -> None:
    store = get_supabase_vector_store(
        embeddings=DeterministicFakeEmbedding(size=8),
        table_name=TENANT_TABLE,
        rpc_function="match_nothing",
        client=supabase_client,
    )

    with pytest.raises(UserError, match=r"no function 'match_nothing'.*supabase_documents_sql"):
        store.similarity_search("eins")


def test_a_missing_table_is_a_user_error(rag_tables: SupabaseStack, supabase_client: Client) -> None:
    store = get_supabase_vector_store(
        embeddings=DeterministicFakeEmbedding(size=8), table_name="no_such_docs", client=supabase_client
    )

    with pytest.raises(UserError, match=r"no table 'no_such_docs'.*Nothing was written"):
        store.add_texts(["eins"])
    with pytest.raises(UserError, match="no table 'no_such_docs'"):
        store.get_by_ids(["1"])
    with pytest.raises(UserError, match="no table 'no_such_docs'"):
        store.delete(["1"])


def test_bad_arguments_are_user_errors(supabase_client: Client) -> None:
    embeddings = DeterministicFakeEmbedding(size=8)
    with pytest.raises(UserError, match="table_name must be a lowercase SQL identifier"):
        get_supabase_vector_store(embeddings=embeddings, table_name="Docs; drop", client=supabase_client)
    with pytest.raises(UserError, match="upsert_batch_size must be an int >= 1"):
        get_supabase_vector_store(embeddings=embeddings, upsert_batch_size=0, client=supabase_client)
    with pytest.raises(UserError, match="must be a JSON mapping"):
        get_supabase_vector_store(embeddings=embeddings, filter="company", client=supabase_client)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="got no documents"):
        create_supabase_vector_store([], embeddings=embeddings, client=supabase_client)
    with pytest.raises(UserError, match="dimension must be an int from 1 to 2000"):
        supabase_documents_sql(dimension=3072)
    store = get_supabase_vector_store(embeddings=embeddings, client=supabase_client)
    with pytest.raises(UserError, match="refusing to empty"):
        store.delete()
    with pytest.raises(UserError, match="2 texts but 1 ids"):
        store.add_texts(["a", "b"], ids=["1"])


def test_client_comes_from_the_environment(rag_tables: SupabaseStack, monkeypatch: pytest.MonkeyPatch) -> None:
    truncate(rag_tables, TENANT_TABLE)
    embeddings = DeterministicFakeEmbedding(size=8)
    with pytest.raises(UserError, match="No Supabase client given"):
        get_supabase_vector_store(embeddings=embeddings)
    monkeypatch.setenv("SUPABASE_URL", rag_tables.url)
    monkeypatch.setenv("SUPABASE_SERVICE_ROLE_KEY", rag_tables.service_key)

    store = SupabaseVectorStore.from_texts(
        ["aus der Umgebung"], embeddings, table_name=TENANT_TABLE, rpc_function="match_rag_tenant_docs"
    )
    try:
        assert [d.page_content for d in store.similarity_search("aus der Umgebung", k=1)] == ["aus der Umgebung"]
    finally:
        # A failed search must not leave the store's keep-alive socket for garbage collection to find.
        store.client.postgrest.session.close()


def _unclosed_sockets_after(action: Callable[[], object]) -> list[str]:
    """ResourceWarnings for sockets that ``action`` left open, once its objects are garbage."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        try:
            action()
        except UserError:
            pass
        gc.collect()
    return [str(w.message) for w in caught if "unclosed" in str(w.message)]


def test_a_failed_ingest_closes_the_client_it_made_from_the_environment(
    rag_tables: SupabaseStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPABASE_URL", rag_tables.url)
    monkeypatch.setenv("SUPABASE_SERVICE_ROLE_KEY", rag_tables.service_key)
    embeddings = DeterministicFakeEmbedding(size=8)
    with pytest.raises(UserError, match="no_such_docs"):  # a real PostgREST 404: the table does not exist
        SupabaseVectorStore.from_texts(["x"], embeddings, table_name="no_such_docs")

    def from_texts() -> object:
        return SupabaseVectorStore.from_texts(["x"], embeddings, table_name="no_such_docs")

    def create() -> object:
        return create_supabase_vector_store(["x"], embeddings=embeddings, table_name="no_such_docs")

    assert _unclosed_sockets_after(from_texts) == []
    assert _unclosed_sockets_after(create) == []


def test_shipped_sql_defaults_to_documents_and_384_dimensions() -> None:
    sql = supabase_documents_sql()

    assert "create table if not exists public.documents" in sql
    assert "query_embedding vector(384)" in sql
    assert "where d.metadata @> filter" in sql
    assert "using hnsw (embedding vector_cosine_ops)" in sql


def test_empty_add_repr_and_relevance_scores(tenant_store: SupabaseVectorStore) -> None:
    assert tenant_store.add_texts([]) == []
    assert (
        repr(tenant_store) == "SupabaseVectorStore(table_name='rag_tenant_docs', rpc_function='match_rag_tenant_docs')"
    )
    tenant_store.add_texts(["eins", "zwei"])

    scored = tenant_store.similarity_search_with_relevance_scores("eins", k=2)

    assert scored[0][0].page_content == "eins"
    assert scored[0][1] == pytest.approx(1.0, abs=1e-5)
    assert all(0.0 <= score <= 1.0 for _, score in scored)
