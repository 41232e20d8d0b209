"""`Closeable`: ``with saver:`` releases what the saver holds (a connection, a pool) at the end of the block."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Closeable"]


class Closeable:
    """Mixin: a context manager whose exit calls ``close()`` (the class says what that releases)."""

    def close(self) -> None:
        """Release what the object holds; it cannot be used afterwards."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
