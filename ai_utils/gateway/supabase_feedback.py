"""`SupabaseFeedbackSink`: feedback rows in a Supabase (PostgREST) table (extra ``supabase``).

Create the table with `supabase_feedback_sql()`; ``request_id`` joins the audit table.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from ai_utils._optional import missing_extra
from ai_utils.gateway.feedback import FeedbackEntry
from ai_utils.gateway.supabase_audit import _check_table

try:
    from postgrest.types import ReturnMethod
    from supabase import Client
except ImportError as _import_error:  # pragma: no cover - supabase_audit raises first
    raise missing_extra("supabase", extra="supabase", feature="SupabaseFeedbackSink") from _import_error

__all__ = ["SupabaseFeedbackSink", "supabase_feedback_sql"]

_DEFAULT_TABLE = "llm_feedback"


def supabase_feedback_sql(table: str = _DEFAULT_TABLE) -> str:
    """Return the SQL that creates the feedback table `SupabaseFeedbackSink` writes to.

    Args:
        table: the table name.

    Returns:
        The SQL script.

    Raises:
        UserError: ``table`` is not a plain lowercase identifier.
    """
    sql = resources.files("ai_utils.gateway").joinpath("supabase_feedback.sql").read_text(encoding="utf-8")
    return sql.replace(_DEFAULT_TABLE, _check_table(table))


class SupabaseFeedbackSink:
    """Insert feedback into a Supabase table through PostgREST.

    Args:
        client: a supabase-py ``Client`` (service role: the table has row level security).
        table: the table created by `supabase_feedback_sql`.
    """

    def __init__(self, client: Client, table: str = _DEFAULT_TABLE) -> None:
        self.client = client
        self.table = _check_table(table)

    def write(self, entry: FeedbackEntry) -> None:
        """Insert the entry (``created_at`` defaults to the server time).

        Args:
            entry: the entry.
        """
        if not entry.created_at:
            entry = replace(entry, created_at=datetime.now(UTC).isoformat())
        row: dict[str, Any] = json.loads(json.dumps(entry.to_dict(), default=str))
        self.client.table(self.table).insert(row, returning=ReturnMethod.minimal).execute()
