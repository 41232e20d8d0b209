"""The Supabase checkpoint tables: their SQL, their names, and what a PostgREST refusal means for them.

Kept apart from `ai_utils.memory.supabase` (the saver) because none of it needs supabase-py: the SQL is a
shipped file, and errors are read from the ``code`` / ``message`` every PostgREST ``APIError`` carries.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from ai_utils.exceptions import AiUtilsError, UserError

__all__ = ["SupabaseCheckpointError", "check_table", "refusal", "supabase_checkpoints_sql"]

_TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,50}$")
# Missing table or column, and (PGRST202, 42883) a missing function: the SQL was not run, or an older version was.
_MISSING_TABLE_CODES = {"42P01", "PGRST205", "PGRST204", "42703", "PGRST202", "42883"}


class SupabaseCheckpointError(AiUtilsError):
    """Supabase (PostgREST) refused a checkpoint read or write.

    Attributes:
        code: the PostgREST / Postgres error code, e.g. ``"42501"`` (permission denied).
    """

    def __init__(self, message: str, *, code: str | None) -> None:
        super().__init__(message)
        self.code = code


def check_table(table: Any) -> str:
    """``table`` when it is a plain lowercase SQL identifier, else a `UserError`."""
    if not isinstance(table, str) or not _TABLE_NAME.match(table):
        raise UserError(
            f"table must be a lowercase SQL identifier (letters, digits, _; at most 51 chars), got {table!r}. "
            "Pass e.g. table='checkpoints'."
        )
    return table


def supabase_checkpoints_sql(table: str = "checkpoints") -> str:
    """Return the SQL that creates the tables and functions `SupabaseCheckpointSaver` needs.

    The shipped file ``ai_utils/memory/supabase_checkpoints.sql`` creates ``checkpoints`` and
    ``checkpoints_writes``, and the functions ``checkpoints_put`` and ``checkpoints_get_tuple`` (one
    request per put and per read); for another ``table`` every object is renamed (``<table>``,
    ``<table>_writes``, ``<table>_put``, ``<table>_get_tuple``). Row level security is enabled without
    policies and the functions run with the caller's rights, so only the service role can read
    conversations. Run it once in the Supabase SQL editor or with psql; running it again (e.g. after an
    upgrade) keeps the stored checkpoints.

    Args:
        table: the checkpoint table name.

    Returns:
        The SQL script.

    Raises:
        UserError: ``table`` is not a plain lowercase identifier.
    """
    name = check_table(table)
    sql = resources.files("ai_utils.memory").joinpath("supabase_checkpoints.sql").read_text(encoding="utf-8")
    return re.sub(r"\bcheckpoints(?=\b|_)", name, sql)


def refusal(code: str | None, message: str | None, what: str, table: str) -> AiUtilsError:
    """The error to raise when PostgREST refused to ``what`` with ``code`` / ``message``."""
    if code in _MISSING_TABLE_CODES:
        return UserError(
            f"SupabaseCheckpointSaver could not {what}: {message} (code {code}). Create (or update) the "
            f"tables and functions with the SQL from ai_utils.memory.supabase.supabase_checkpoints_sql({table!r})."
        )
    hint = " Use the service role key, not the anon key." if code == "42501" else ""
    if code is None and message is None:
        # PostgREST answers some requests with a bare `{}` body, e.g. while it reloads its schema cache.
        return SupabaseCheckpointError(
            f"SupabaseCheckpointSaver could not {what}: PostgREST answered with an error but no details. "
            "Retry; if it persists, check the Supabase project's API logs.",
            code=None,
        )
    return SupabaseCheckpointError(
        f"SupabaseCheckpointSaver could not {what}: {message} (code {code}).{hint}", code=code
    )
