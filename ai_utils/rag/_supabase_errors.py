"""What a PostgREST refusal means for the Supabase vector store: a caller mistake (`UserError`) or not.

A missing table or match function and vectors of the wrong size are the caller's to fix, and the message says
how (with `supabase_documents_sql`); anything else is a `SupabaseVectorStoreError` with the Postgres code. A
failed multi-batch write names the ids already written (an upsert, so repeating it is safe).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ai_utils.exceptions import AiUtilsError, UserError

if TYPE_CHECKING:
    from postgrest import APIError

__all__ = ["SupabaseVectorStoreError", "store_error"]


class SupabaseVectorStoreError(AiUtilsError):
    """Supabase (PostgREST) refused a vector store read or write for a reason other than a caller mistake.

    Attributes:
        code: the PostgREST / Postgres error code, e.g. ``"42501"`` (permission denied).
        written_ids: ids already upserted before a multi-batch write failed (empty if nothing was written).
    """

    def __init__(self, message: str, *, code: str | None, written_ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.written_ids = list(written_ids)


def store_error(
    error: APIError, action: str, *, table_name: str, rpc_function: str, written: Sequence[str] = ()
) -> AiUtilsError:
    """The error to raise for PostgREST's ``error`` during ``action`` (``"writing documents"``, ``"the search"``...)."""
    code, message = error.code, error.message or str(error)
    done = (
        f" {len(written)} documents were written before the failure (ids {written[:5]!r}...); the write is an "
        "upsert, so repeating it with the same ids is safe."
        if written
        else " Nothing was written."
        if action.startswith("writ")
        else ""
    )
    if code == "PGRST202" or (code == "42883" and rpc_function in message):
        return UserError(
            f"Supabase has no function {rpc_function!r} matching (query_embedding, match_count, filter) "
            f"({message}). Create it with supabase_documents_sql(table_name={table_name!r}, "
            f"rpc_function={rpc_function!r}, dimension=<your vector size>)."
        )
    if code in {"42P01", "PGRST205"} or (code is None and not error.message):
        # An upsert into an unknown table gets a bare 404 `{}` from PostgREST.
        return UserError(
            f"Supabase has no table {table_name!r} ({message}).{done} Create it with "
            f"supabase_documents_sql(table_name={table_name!r}, dimension=<your vector size>)."
        )
    if code == "22000" and "dimension" in message:
        return UserError(
            f"The embedding vectors do not fit table {table_name!r}: {message}.{done} Use the embedding "
            "model the table was created for, or create the table with the matching `dimension`."
        )
    return SupabaseVectorStoreError(
        f"Supabase refused {action} on {table_name!r}: [{code}] {message}.{done}",
        code=code,
        written_ids=written,
    )
