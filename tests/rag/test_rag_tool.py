from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.messages import ToolMessage
from langchain_core.vectorstores import InMemoryVectorStore

from ai_utils.agents.agent import Agent
from ai_utils.exceptions import UserError
from ai_utils.rag.faiss import create_faiss_store
from ai_utils.rag.memory_store import create_ram_vector_store
from ai_utils.rag.tool import NO_RESULTS, create_rag_tool
from ai_utils.testing import FakeChatModel

QUESTION = "Wann beginnt die Frühschicht?"
ANSWER = "Die Frühschicht beginnt um 6 Uhr."


def test_agent_gets_the_early_shift_document_first_from_the_rag_tool(
    local_embeddings: Embeddings, handbook: list[dict[str, object]]
) -> None:
    store = create_faiss_store(handbook, embeddings=local_embeddings)
    tool = create_rag_tool(vector_store=store, name="search_handbook", description="Sucht im Mitarbeiterhandbuch")
    model = FakeChatModel([{"tool_calls": [{"name": "search_handbook", "args": {"query": QUESTION}}]}, "Um 6 Uhr."])
    agent = Agent(llm=model, prompt="Nutze search_handbook für faktenbasierte Antworten.", tools=[tool])

    assert agent.invoke(QUESTION) == "Um 6 Uhr."

    tool_messages = [m for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1
    content = str(tool_messages[0].content)
    first = content.split("\n\n")[0]
    assert first.startswith("[source: handbuch") and first.endswith(f"]\n{ANSWER}")  # the model can cite it
    assert content.count("\n\n") == 5  # k=6 documents by default


async def test_filter_reaches_similarity_search_unchanged_sync_and_async() -> None:
    seen: list[object] = []

    class Recording(InMemoryVectorStore):
        def similarity_search(self, query: str, k: int = 4, **kwargs: object) -> list[Document]:
            seen.append(kwargs.get("filter"))
            return super().similarity_search(query, k=k)

        async def asimilarity_search(self, query: str, k: int = 4, **kwargs: object) -> list[Document]:
            seen.append(kwargs.get("filter"))
            return super().similarity_search(query, k=k)

    store = Recording(DeterministicFakeEmbedding(size=8))
    store.add_texts(["eins", "zwei"])
    tenant = {"company_id": "company-1", "job_id": "job-1"}
    tool = create_rag_tool(vector_store=store, name="search_faq", description="FAQ", k=1, filter=tenant)

    assert tool.invoke({"query": "eins"}) == "eins"
    assert await tool.ainvoke({"query": "zwei"}) == "zwei"
    assert seen == [tenant, tenant]
    assert seen[0] is tenant


def test_tool_with_a_tenant_filter_sees_only_that_tenant() -> None:
    store = create_ram_vector_store(
        [
            {"page_content": "Frühschicht bei A: 6 Uhr", "metadata": {"company_id": "a"}},
            {"page_content": "Frühschicht bei B: 5 Uhr", "metadata": {"company_id": "b"}},
        ],
        embeddings=DeterministicFakeEmbedding(size=8),
    )
    tool = create_rag_tool(vector_store=store, name="faq", description="FAQ", filter={"company_id": "b"})
    nothing = create_rag_tool(vector_store=store, name="faq", description="FAQ", filter={"company_id": "c"})

    assert tool.invoke({"query": "Frühschicht"}) == "[company_id: b]\nFrühschicht bei B: 5 Uhr"
    assert nothing.invoke({"query": "Frühschicht"}) == NO_RESULTS


def test_tool_schema_is_a_single_query_string() -> None:
    store = create_ram_vector_store(["x"], embeddings=DeterministicFakeEmbedding(size=8))
    tool = create_rag_tool(vector_store=store, name="search_docs", description="Sucht Produktdokumente")

    assert tool.name == "search_docs"
    assert tool.description == "Sucht Produktdokumente"
    assert list(tool.args) == ["query"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "search docs", "description": "x"}, "tool name must be"),
        ({"name": "search_docs", "description": " "}, "needs a description"),
        ({"name": "search_docs", "description": "x", "k": 0}, r"k=...\) must be an int >= 1"),
    ],
)
def test_bad_tool_arguments_are_user_errors(kwargs: dict[str, object], message: str) -> None:
    store = create_ram_vector_store(["x"], embeddings=DeterministicFakeEmbedding(size=8))

    with pytest.raises(UserError, match=message):
        create_rag_tool(vector_store=store, **kwargs)  # type: ignore[arg-type]


def test_each_document_carries_its_metadata_for_citation() -> None:
    store = create_ram_vector_store(
        [
            {"page_content": "Urlaub: zwei Wochen vorher.", "metadata": {"source": "handbuch.pdf", "page": 12}},
            "Ohne Quelle.",
        ],
        embeddings=DeterministicFakeEmbedding(size=8),
    )
    tool = create_rag_tool(vector_store=store, name="docs", description="Docs", k=2)
    blocks = tool.invoke({"query": "Urlaub"}).split("\n\n")
    assert "[source: handbuch.pdf, page: 12]\nUrlaub: zwei Wochen vorher." in blocks
    assert "Ohne Quelle." in blocks
