"""`turn_to_docs`: one normaliser for everything the RAG helpers accept as data."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from ai_utils.exceptions import UserError

__all__ = ["assign_ids", "non_empty_docs", "turn_to_docs"]


def turn_to_docs(data: Any) -> list[Document]:
    """Normalise strings, `Document`s and ``{page_content, metadata, id?}`` mappings (or a list of them).

    Example:
        ```python
        docs = turn_to_docs(["Die Frühschicht beginnt um 6 Uhr.", {"page_content": "FAQ", "metadata": {"lang": "de"}}])
        ```

    Args:
        data: one item or an iterable of items; metadata and ids (``Document.id`` or a mapping's ``id``) are kept.

    Returns:
        The documents, in order (given `Document`s are returned as they are, not copied).

    Raises:
        UserError: an item has an unsupported type, or a mapping lacks a string ``page_content``.
    """
    items: Iterable[Any] = [data] if isinstance(data, (str, Document, Mapping)) else data
    if not isinstance(items, Iterable):
        raise UserError(
            f"Cannot turn {data!r} into documents. "
            "Pass a string, a `Document`, a `{'page_content': str, 'metadata': {...}}` mapping or a list of them."
        )
    return [_to_document(item) for item in items]


def _to_document(item: Any) -> Document:
    if isinstance(item, Document):
        return item
    if isinstance(item, str):
        return Document(page_content=item)
    if isinstance(item, Mapping) and isinstance(item.get("page_content"), str):
        metadata = item.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise UserError(f"metadata must be a mapping, got {metadata!r}. Pass e.g. `'metadata': {{'source': ...}}`.")
        doc_id = item.get("id")
        return Document(
            page_content=item["page_content"], metadata=dict(metadata), id=None if doc_id is None else str(doc_id)
        )
    raise UserError(
        f"Cannot turn {item!r} into a document. "
        "Pass strings, `Document`s or `{'page_content': str, 'metadata': {...}}` mappings."
    )


def non_empty_docs(data: Any, *, caller: str) -> list[Document]:
    """`turn_to_docs`, refusing empty data with a `UserError` that names ``caller``."""
    docs = turn_to_docs(data)
    if not docs:
        raise UserError(f"{caller}() got no documents ({data!r}). Pass at least one string or `Document`.")
    return docs


def assign_ids(
    count: int, ids: Sequence[str | None] | None, metadatas: Sequence[Mapping[str, Any]] | None = None
) -> list[str]:
    """One id per text: the given ones (as str), a new uuid4 where an id is None or no ids were given.

    Raises:
        UserError: ``ids`` or ``metadatas`` has another length than the texts.
    """
    for name, values in (("metadatas", metadatas), ("ids", ids)):
        if values is not None and len(values) != count:
            raise UserError(f"Got {count} texts but {len(values)} {name}. Pass one per text.")
    return [str(uuid.uuid4()) if i is None else str(i) for i in (ids if ids is not None else [None] * count)]
