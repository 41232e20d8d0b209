"""`SupabaseFeedbackSink`: feedback rows in a Supabase (PostgREST) table (extra ``supabase``).

Create the table with `supabase_feedback_sql()`; ``request_id`` joins the audit table.
"""

from __future__ import annotations

from ai_utils.gateway._supabase import SupabaseSink, table_sql
from ai_utils.gateway.feedback import FeedbackEntry
from ai_utils.gateway.feedback._sinks import stamped

__all__ = ["SupabaseFeedbackSink", "supabase_feedback_sql"]

_DEFAULT_TABLE = "llm_feedback"


def supabase_feedback_sql(table: str = _DEFAULT_TABLE) -> str:
    """Return the SQL that creates the feedback table `SupabaseFeedbackSink` writes to, named ``table``.

    A ``table`` that is not a plain lowercase identifier raises `UserError`, as in `supabase_audit_sql`.
    """
    return table_sql("supabase_feedback.sql", _DEFAULT_TABLE, table)


class SupabaseFeedbackSink(SupabaseSink):
    """Insert feedback into a Supabase table through PostgREST.

    Args:
        client: a supabase-py ``Client`` (service role: the table has row level security).
        table: the table created by `supabase_feedback_sql`; default ``"llm_feedback"``.
    """

    default_table = _DEFAULT_TABLE

    def write(self, entry: FeedbackEntry) -> None:
        """Insert the entry (``created_at`` defaults to the server time).

        Args:
            entry: the entry.
        """
        self._insert(self._json_row(stamped(entry).to_dict()))
