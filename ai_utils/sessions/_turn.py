"""`Turn` and `TurnResult`: one prompt and everything the agent does to answer it, as its caller sees it.

A turn follows the stored log: its own lines from its ``turn_start`` (the line that names the session, so
a browser reading ``StreamResponse(turn)`` learns its session id first) to its ``turn_end`` — or to its
``turn_yield`` when it stopped at its ``yield_at``; ``s.resume()`` then gives a `Turn` that follows the rest.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from ai_utils.client import StreamChunk
from ai_utils.memory._methods import Flow, Step, twins
from ai_utils.sessions._engine import turn_ends

if TYPE_CHECKING:
    from ai_utils.sessions._session import Session

__all__ = ["StopReason", "Turn", "TurnResult"]

StopReason = Literal[
    "end_turn",
    "interrupted",
    "max_model_turns",
    "max_output_tokens",
    "refused",
    "cancelled",
    "yielded",
    "error",
    "unknown",
]


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended.

    Attributes:
        turn_id: the turn.
        session_id: its session.
        stop_reason: ``end_turn``, ``interrupted`` (an approval waits: ``s.prompt(decision=...)``),
            ``max_model_turns``, ``max_output_tokens`` (the model hit its output limit), ``refused`` (the
            provider refused), ``cancelled`` (also by ``timeout`` or a prompt with ``on_busy="interrupt"`` /
            ``"rollback"``), ``yielded`` (it reached ``yield_at``: the next prompt or ``s.resume()`` continues
            it), ``error`` or ``unknown``.
        usage: summed token usage of the turn's model calls (``input_tokens``, ``output_tokens``, ``total_tokens``).
        error: ``{"type", "message"}`` when ``stop_reason == "error"`` (or ``"cancelled"`` by ``timeout``:
            ``type == "TimeoutError"``), else ``None``.
        repeated: ``True`` when the prompt repeated a ``message_id`` and this is the original turn.
        output: the answer: its text, or an instance of the agent's ``output`` model.
    """

    turn_id: str
    session_id: str
    stop_reason: StopReason
    usage: dict[str, int]
    error: dict[str, str] | None
    repeated: bool
    output: Any


class Turn:
    """One prompt and everything the agent does to answer it; iterate it for its chunks (sync or async).

    Iterating yields the turn's own lines as bare chunks, first its ``turn_start`` line (``turn_id``,
    ``session_id``, ``message_id``), last its ``turn_end`` (or ``turn_yield``).

    Attributes:
        session_id: the session.
        id: the turn's id.
        message_id: the prompt's message id (given or generated).
        repeated: the prompt repeated a ``message_id``; this follows the original turn.
    """

    def __init__(
        self,
        session: Session,
        turn_id: str,
        message_id: str,
        repeated: bool,
        after: int,
        *,
        ends_seen: int = 0,
        continued: bool = False,
    ) -> None:
        self._session = session
        self.session_id = session.id
        self.id = turn_id
        self.message_id = message_id
        self.repeated = repeated
        self._after = after
        self._ends_seen = ends_seen  # a continued (yielded) turn's result is its next end, not the last one
        self._continued = continued

    def __repr__(self) -> str:
        return f"Turn(session_id={self.session_id!r}, id={self.id!r}, message_id={self.message_id!r})"

    def _start(self) -> int:
        if self._continued:
            return self._after
        row = self._session._store.turn(self.id)
        return self._after if row is None or row.first_cursor is None else min(self._after, row.first_cursor - 1)

    def __iter__(self) -> Iterator[StreamChunk]:
        for line in self._session._follow(self._start(), turn_id=self.id):
            yield line["chunk"]

    async def __aiter__(self) -> AsyncIterator[StreamChunk]:
        async for line in self._session._afollow(self._start(), turn_id=self.id):
            yield line["chunk"]

    def _result(self) -> TurnResult | None:
        row = self._session._store.turn(self.id)
        if row is None or row.status not in ("ended", "yielded"):
            return None
        stored = row.result or {}
        if int(stored.get("ends", 1)) <= self._ends_seen:
            return None
        output = stored.get("output") or {}
        value: Any = output.get("text", "")
        model = getattr(self._session._agent, "output", None)
        if "structured" in output:
            value = output["structured"]
            if isinstance(model, type) and issubclass(model, BaseModel) and isinstance(value, Mapping):
                value = model.model_validate(value)
        return TurnResult(
            turn_id=self.id,
            session_id=self.session_id,
            stop_reason=row.stop_reason or "unknown",  # type: ignore[arg-type]
            usage=dict(stored.get("usage") or {}),
            error=stored.get("error"),
            repeated=self.repeated,
            output=value,
        )

    def _wait(self, timeout: float | None = None) -> Flow[TurnResult]:
        """Wait for the turn to end: the body of `result` and `aresult`."""
        store = self._session._store
        signal = store.engine.signal
        key = turn_ends(self.session_id)  # woken when a turn ends, not by every stored line (each read costs a query)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            seen = signal.version(key)
            result = self._result()
            if result is not None:
                return result
            wait = store.poll_seconds
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise TimeoutError(f"Turn {self.id!r} did not end within {timeout} s.")
            yield Step(signal.wait, signal.await_version, (key, seen, wait))

    _result_sync, aresult = twins(_wait, "result")

    def result(self, timeout: float | None = None) -> TurnResult:
        """Wait for the turn to end (it runs whether or not anyone iterates it).

        Raises:
            TimeoutError: when ``timeout`` seconds pass first.
        """
        self._session._check_sync("turn.result()", "`await turn.aresult()`")
        return self._result_sync(timeout)
