"""`Closing`: close a chunk source when its consumer is done with it, if the source can be closed."""

from __future__ import annotations

__all__ = ["Closing"]


class Closing:
    """``with Closing(source)`` (or ``async with``): on exit ``source.close()`` (or ``await source.aclose()``).

    Unlike `contextlib.closing`/`contextlib.aclosing`, a source without that method (a list, a plain iterator)
    is fine: a consumer that stops early (client disconnect) must stop a generator source at once, and anything
    else has nothing to stop.

    Args:
        source: the iterable the block reads.
    """

    __slots__ = ("source",)

    def __init__(self, source: object) -> None:
        self.source = source

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        close = getattr(self.source, "close", None)
        if close is not None:
            close()

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc_info: object) -> None:
        aclose = getattr(self.source, "aclose", None)
        if aclose is not None:
            await aclose()
