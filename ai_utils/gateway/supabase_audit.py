"""`SupabaseAuditSink`: gateway audit rows in a Supabase (PostgREST) table (extra ``supabase``).

Create the table with `supabase_audit_sql()` (the shipped ``supabase_audit.sql``).
"""

from __future__ import annotations

from ai_utils.gateway._supabase import Client, ReturnMethod, SupabaseSink, table_sql
from ai_utils.gateway.audit import AuditEntry

__all__ = ["SupabaseAuditSink", "supabase_audit_sql"]

_DEFAULT_TABLE = "llm_audit_log"


def supabase_audit_sql(table: str = _DEFAULT_TABLE) -> str:
    """Return the SQL that creates the audit table `SupabaseAuditSink` writes to.

    Row level security is enabled without policies, so only the service role reads or writes audit rows.

    Args:
        table: the table name.

    Returns:
        The SQL script.

    Raises:
        UserError: ``table`` is not a plain lowercase identifier.
    """
    return table_sql("supabase_audit.sql", _DEFAULT_TABLE, table)


class SupabaseAuditSink(SupabaseSink):
    """Insert audit rows into a Supabase table through PostgREST.

    Args:
        client: a supabase-py ``Client`` (service role: the table has row level security).
        table: the table created by `supabase_audit_sql`; default ``"llm_audit_log"``.
    """

    default_table = _DEFAULT_TABLE

    def __init__(self, client: Client, table: str | None = None) -> None:
        super().__init__(client, table)
        self._pending: set[str] = set()  # request ids whose pending row (required audit mode) this sink wrote

    def write(self, entry: AuditEntry) -> None:
        """Insert the row; PostgREST errors propagate to the gateway.

        Args:
            entry: the row.
        """
        row = self._json_row(entry.to_dict())
        if entry.request_id in self._pending and entry.status != "pending":
            self.client.table(self.table).update(row, returning=ReturnMethod.minimal).eq(
                "request_id", entry.request_id
            ).eq("status", "pending").execute()
            self._pending.discard(entry.request_id)
            return
        self._insert(row)
        if entry.status == "pending":
            self._pending.add(entry.request_id)
