"""`create_rag_chain`: question → retrieved context → answer text, as a thin layer over `Chain`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils.chains.chain import Chain

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.vectorstores import VectorStore

__all__ = ["DEFAULT_RAG_PROMPT", "create_rag_chain"]

DEFAULT_RAG_PROMPT = (
    "Answer the question using only the context below. "
    "If the context does not contain the answer, say that you do not know."
)


def create_rag_chain(
    *, vector_store: VectorStore, llm: BaseChatModel | None = None, prompt: str | None = None, k: int = 4
) -> Chain[str]:
    """A chain that answers ``{"question": str}`` with the ``k`` most similar documents as context.

    Example:
        ```python
        rag = create_rag_chain(vector_store=create_faiss_store(["Die Frühschicht beginnt um 6 Uhr."]))
        answer = rag.invoke({"question": "Wann beginnt die Frühschicht?"})  # str
        ```

    Args:
        vector_store: any LangChain `VectorStore`.
        llm: the chat model; default `get_llm()`.
        prompt: the system prompt; default `DEFAULT_RAG_PROMPT` (answer only from the context).
        k: how many documents to retrieve per question.

    Returns:
        A `Chain` whose ``invoke``/``ainvoke`` return the answer text and ``stream``/``astream`` yield it.

    Raises:
        UserError: ``k`` is not an int >= 1.
    """
    return Chain(llm=llm, prompt=DEFAULT_RAG_PROMPT if prompt is None else prompt, vector_store=vector_store, k=k)
