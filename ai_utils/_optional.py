"""The one message format for a missing optional dependency."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(package: str, *, extra: str, feature: str) -> ImportError:
    """Build the ImportError raised when an optional dependency is not installed.

    Args:
        package: the pip package that is missing, e.g. ``"faiss-cpu"``.
        extra: the ai_utils extra that installs it, e.g. ``"faiss"``.
        feature: what the user tried to use, e.g. ``"the FAISS vector store"``.

    Returns:
        An ImportError with an install hint; raise it ``from`` the original error.
    """
    return ImportError(f'Please install `{package}` to use {feature}: `pip install "ai-utils[{extra}]"`')
