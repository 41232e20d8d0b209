"""What the gateway's Supabase sinks share: the one ``supabase`` import, the table check, the SQL scripts, the insert.

`SupabaseAuditSink` (``supabase_audit``) and `SupabaseFeedbackSink` (``supabase_feedback``) build on `SupabaseSink`.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any, ClassVar

from ai_utils._optional import missing_extra
from ai_utils.exceptions import UserError

try:
    from postgrest.types import ReturnMethod
    from supabase import Client
except ImportError as _import_error:
    raise missing_extra(
        "supabase", extra="supabase", feature="SupabaseAuditSink or SupabaseFeedbackSink"
    ) from _import_error

__all__ = ["Client", "ReturnMethod", "SupabaseSink", "check_table", "table_sql"]

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_table(table: str) -> str:
    """``table`` if it is a plain lowercase identifier (it is spliced into SQL), else `UserError`.

    Args:
        table: the table name.

    Returns:
        ``table``.
    """
    if not _IDENTIFIER.match(table):
        raise UserError(f"Audit table name {table!r} is not a plain lowercase identifier. Use e.g. 'llm_audit_log'.")
    return table


def table_sql(script: str, default_table: str, table: str) -> str:
    """The shipped SQL ``script`` (next to this module) with ``default_table`` renamed to ``table``.

    Args:
        script: the file name, e.g. ``"supabase_audit.sql"``.
        default_table: the table name the script uses.
        table: the name to create instead.

    Returns:
        The SQL script.
    """
    sql = resources.files("ai_utils.gateway").joinpath(script).read_text(encoding="utf-8")
    return sql.replace(default_table, check_table(table))


class SupabaseSink:
    """Rows into one Supabase table through PostgREST; PostgREST errors propagate to the caller.

    Args:
        client: a supabase-py ``Client`` (service role: the tables have row level security).
        table: the table name (a plain lowercase identifier); default the subclass's ``default_table``.
    """

    default_table: ClassVar[str]

    def __init__(self, client: Client, table: str | None = None) -> None:
        self.client = client
        self.table = check_table(self.default_table if table is None else table)

    @staticmethod
    def _json_row(data: dict[str, Any]) -> dict[str, Any]:
        # Through JSON text, so dates and other non-JSON values arrive as PostgREST stores them (``str``).
        row: dict[str, Any] = json.loads(json.dumps(data, default=str))
        return row

    def _insert(self, row: dict[str, Any]) -> None:
        self.client.table(self.table).insert(row, returning=ReturnMethod.minimal).execute()
