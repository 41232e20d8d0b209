"""`SupabaseAuditSink`: gateway audit rows in a Supabase (PostgREST) table (extra ``supabase``).

Create the table with `supabase_audit_sql()` (the shipped ``supabase_audit.sql``).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

from ai_utils._optional import missing_extra
from ai_utils.exceptions import UserError
from ai_utils.gateway.audit import AuditEntry

try:
    from postgrest.types import ReturnMethod
    from supabase import Client
except ImportError as _import_error:
    raise missing_extra("supabase", extra="supabase", feature="SupabaseAuditSink") from _import_error

__all__ = ["SupabaseAuditSink", "supabase_audit_sql"]

_DEFAULT_TABLE = "llm_audit_log"
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _check_table(table: str) -> str:
    if not _IDENTIFIER.match(table):
        raise UserError(f"Audit table name {table!r} is not a plain lowercase identifier. Use e.g. 'llm_audit_log'.")
    return table


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
    sql = resources.files("ai_utils.gateway").joinpath("supabase_audit.sql").read_text(encoding="utf-8")
    return sql.replace(_DEFAULT_TABLE, _check_table(table))


class SupabaseAuditSink:
    """Insert audit rows into a Supabase table through PostgREST.

    Args:
        client: a supabase-py ``Client`` (service role: the table has row level security).
        table: the table created by `supabase_audit_sql`.
    """

    def __init__(self, client: Client, table: str = _DEFAULT_TABLE) -> None:
        self.client = client
        self.table = _check_table(table)
        self._pending: set[str] = set()  # request ids whose pending row (required audit mode) this sink wrote

    def write(self, entry: AuditEntry) -> None:
        """Insert the row; PostgREST errors propagate to the gateway.

        Args:
            entry: the row.
        """
        row: dict[str, Any] = json.loads(json.dumps(entry.to_dict(), default=str))
        table = self.client.table(self.table)
        if entry.request_id in self._pending and entry.status != "pending":
            table.update(row, returning=ReturnMethod.minimal).eq("request_id", entry.request_id).eq(
                "status", "pending"
            ).execute()
            self._pending.discard(entry.request_id)
            return
        table.insert(row, returning=ReturnMethod.minimal).execute()
        if entry.status == "pending":
            self._pending.add(entry.request_id)
