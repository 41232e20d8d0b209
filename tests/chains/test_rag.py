from __future__ import annotations

import asyncio

from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.messages import SystemMessage

from ai_utils.chains.chain import Chain
from ai_utils.chains.rag import DEFAULT_RAG_PROMPT, create_rag_chain
from ai_utils.rag.faiss import create_faiss_store
from ai_utils.rag.memory_store import create_ram_vector_store
from ai_utils.testing import FakeChatModel

QUESTION = "Wann beginnt die Frühschicht?"
ANSWER = "Die Frühschicht beginnt um 6 Uhr."


def test_chain_with_a_vector_store_gives_the_model_the_early_shift_document_first(
    local_embeddings: Embeddings, handbook: list[dict[str, object]]
) -> None:
    store = create_ram_vector_store(handbook, embeddings=local_embeddings)
    model = FakeChatModel(["Um 6 Uhr."])
    chain = Chain(llm=model, prompt="Beantworte Fragen nur mit Kontext.", vector_store=store, k=3)

    assert chain.invoke({"question": QUESTION}) == "Um 6 Uhr."

    system = model.calls[0][0]
    assert isinstance(system, SystemMessage)
    assert f"[1] {ANSWER}" in str(system.content)


async def test_rag_chain_answers_a_question_with_retrieved_context(local_embeddings: Embeddings) -> None:
    store = create_faiss_store(["Dokument A", "Dokument B"], embeddings=local_embeddings)
    model = FakeChatModel(["Die Kantine öffnet um 11:30 Uhr.", "Sie öffnet um 11:30 Uhr."])
    rag = create_rag_chain(vector_store=store, llm=model, k=1)

    await rag.aadd_context([{"page_content": "Die Kantine öffnet um 11:30 Uhr.", "metadata": {"src": "c"}}])
    answer = await asyncio.to_thread(rag.invoke, {"question": "Wann öffnet die Kantine?"})  # sync, off the loop
    streamed = "".join([chunk async for chunk in rag.astream({"question": "Und die Kantine?"})])

    assert answer == "Die Kantine öffnet um 11:30 Uhr."
    assert streamed == "Sie öffnet um 11:30 Uhr."
    system = str(model.calls[0][0].content)
    assert system.startswith(DEFAULT_RAG_PROMPT)
    assert "[1] Die Kantine öffnet um 11:30 Uhr." in system
    assert "[2]" not in system


def test_rag_chain_takes_a_custom_prompt_and_chain_add_context_keeps_metadata() -> None:
    store = create_ram_vector_store(["x"], embeddings=DeterministicFakeEmbedding(size=8))
    model = FakeChatModel(["ok"])
    rag = create_rag_chain(vector_store=store, llm=model, prompt="Nur Kontext.", k=2)

    ids = rag.add_context({"page_content": "Dokument C", "metadata": {"page": 3}, "id": "c"})

    assert ids == ["c"]
    assert store.get_by_ids(["c"])[0].metadata == {"page": 3}
    rag.invoke({"question": "Dokument C"})
    assert str(model.calls[0][0].content).startswith("Nur Kontext.")
