"""`create_rag_tool`: a vector-store search as an agent tool (input ``{"query": str}``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.vectorstores import VectorStore
from pydantic import BaseModel, Field

from ai_utils.exceptions import UserError

__all__ = ["NO_RESULTS", "RagToolInput", "create_rag_tool", "format_documents"]

NO_RESULTS = "No matching documents found."
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class RagToolInput(BaseModel):
    """Arguments of a RAG tool."""

    query: str = Field(description="What to search for, in natural language.")


def format_documents(documents: Sequence[Document]) -> str:
    """The tool's reply: each document's metadata line (``source: ...``) and text, best match first.

    The metadata (a ``source``, ``page``, ``url``, ...) lets the model cite where an answer comes from;
    documents are separated by blank lines, and one without metadata is its text alone.
    """
    if not documents:
        return NO_RESULTS
    return "\n\n".join(_document_text(doc) for doc in documents)


def _document_text(doc: Document) -> str:
    if not doc.metadata:
        return doc.page_content
    meta = ", ".join(f"{key}: {_meta_value(value)}" for key, value in doc.metadata.items())
    return f"[{meta}]\n{doc.page_content}"


def _meta_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def create_rag_tool(
    *, vector_store: VectorStore, name: str, description: str, k: int = 6, filter: Any = None
) -> BaseTool:
    """Wrap a vector store as a tool an `Agent` can call with ``{"query": str}``.

    Example:
        ```python
        search_docs = create_rag_tool(
            vector_store=create_faiss_store(["Release Notes 2026-04", "Known Issues"]),
            name="search_docs",
            description="Sucht relevante Produktdokumente",
            filter={"company_id": "company-1"},
        )
        agent = Agent(prompt="Nutze search_docs für faktenbasierte Antworten.", tools=[search_docs])
        ```

    Args:
        vector_store: any LangChain `VectorStore`.
        name: the tool name the model sees (letters, digits, ``_``, ``-``).
        description: when the model should use the tool.
        k: how many documents one call returns at most.
        filter: passed unchanged as ``filter=`` to ``similarity_search`` (omitted when None); for the stores of
            this package a metadata mapping (containment), for Supabase the ``filter`` argument of the RPC.

    Returns:
        A LangChain tool (sync and async) returning the documents, best match first, separated by blank
        lines, each as its ``[key: value, ...]`` metadata line (e.g. ``[source: handbook.pdf, page: 3]``) and
        its text, or ``"No matching documents found."``.

    Raises:
        UserError: a bad ``name``, ``description`` or ``k``.
    """
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise UserError(
            f"RAG tool name must be 1-64 letters, digits, '_' or '-', got {name!r}. Pass e.g. name='search_docs'."
        )
    if not isinstance(description, str) or not description.strip():
        raise UserError(f"RAG tool {name!r} needs a description, got {description!r}. Say what the documents contain.")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UserError(f"create_rag_tool(k=...) must be an int >= 1, got {k!r}. Pass e.g. `k=6`.")
    search: dict[str, Any] = {"k": k} if filter is None else {"k": k, "filter": filter}

    def run(query: str) -> str:
        return format_documents(vector_store.similarity_search(query, **search))

    async def arun(query: str) -> str:
        return format_documents(await vector_store.asimilarity_search(query, **search))

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=name,
        description=description,
        args_schema=RagToolInput,
        # With context_trust="enforce" its results are wrapped as retrieved documents (guard/_trust.py).
        metadata={"context_kind": "retrieved"},
    )
