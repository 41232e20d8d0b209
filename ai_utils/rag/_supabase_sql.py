"""The SQL of a Supabase documents table (`supabase_documents_sql`) and the identifier check it shares with the store.

The shipped ``supabase_documents.sql`` creates ``public.documents`` (``id text``, ``content``, ``metadata jsonb``,
``embedding vector(384)``), its indexes and ``public.match_documents``; this module renames those and the vector
size. It needs no extra: the SQL is plain text.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from ai_utils.exceptions import UserError

__all__ = ["check_identifier", "supabase_documents_sql"]

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,50}$")
_SQL_NAMES = re.compile(r"public\.match_documents|public\.documents\b|documents_(embedding|metadata)_idx|vector\(384\)")
_MAX_HNSW_DIMENSION = 2000


def check_identifier(value: Any, argument: str, example: str) -> str:
    """``value`` if it is a lowercase SQL identifier, else a `UserError` naming ``argument`` and ``example``."""
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise UserError(
            f"{argument} must be a lowercase SQL identifier (letters, digits, _; at most 51 chars), got {value!r}. "
            f"Pass e.g. {argument}={example!r}."
        )
    return value


def supabase_documents_sql(
    table_name: str = "documents", *, rpc_function: str = "match_documents", dimension: int = 384
) -> str:
    """Return the SQL creating a documents table, its indexes and its match function.

    Run it once in the Supabase SQL editor or with psql. ``dimension`` must be the embedding model's
    vector size: 384 for ``get_embeddings("local")``, 1536 for ``text-embedding-3-small``.

    Args:
        table_name: the table (in schema ``public``).
        rpc_function: the match function's name.
        dimension: the vector size, 1..2000 (pgvector's HNSW limit).

    Returns:
        The SQL text (idempotent: ``create ... if not exists`` / ``create or replace``).

    Raises:
        UserError: a bad identifier or dimension.
    """
    table = check_identifier(table_name, "table_name", "documents")
    rpc = check_identifier(rpc_function, "rpc_function", "match_documents")
    if isinstance(dimension, bool) or not isinstance(dimension, int) or not 1 <= dimension <= _MAX_HNSW_DIMENSION:
        raise UserError(
            f"dimension must be an int from 1 to {_MAX_HNSW_DIMENSION} (pgvector's HNSW limit), got {dimension!r}. "
            "Pass your embedding model's vector size, e.g. dimension=384 (or OpenAIEmbeddings(dimensions=...))."
        )
    template = resources.files("ai_utils.rag").joinpath("supabase_documents.sql").read_text(encoding="utf-8")
    names = {
        "public.match_documents": f"public.{rpc}",
        "public.documents": f"public.{table}",
        "vector(384)": f"vector({dimension})",
    }

    def rename(match: re.Match[str]) -> str:
        text = match.group(0)
        return names.get(text) or f"{table}_{match.group(1)}_idx"

    return _SQL_NAMES.sub(rename, template)
