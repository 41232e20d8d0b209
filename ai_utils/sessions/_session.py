"""`Session`, `Turn` and `TurnResult`: the public face of durable sessions (SPEC §14).

Accepting (``prompt``, ``steer``, ``cancel``) is one store transaction in the caller's thread; the turn then
runs on the store's background worker (`_engine.Engine`). Reading (iterating a turn, ``stream``,
``result``) follows the stored log: lines already stored first, then new ones as they are stored (woken at
once in this process, polled from others).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from ai_utils.client import Decision, StreamChunk, StreamLine
from ai_utils.exceptions import UserError
from ai_utils.memory._methods import Flow, Step, aiterate, iterate, twins
from ai_utils.sessions._schema import MAX_STEER_BYTES, check_id, loads
from ai_utils.sessions._store import SessionStore
from ai_utils.streaming._decisions import to_resume

__all__ = ["Session", "StopReason", "Turn", "TurnResult"]

StopReason = Literal["end_turn", "interrupted", "max_model_turns", "cancelled", "error", "unknown"]
_TURN_EVENTS = frozenset({"turn_start", "turn_resume", "turn_end"})


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended.

    Attributes:
        turn_id: the turn.
        session_id: its session.
        stop_reason: ``end_turn``, ``interrupted`` (an approval waits: ``s.prompt(decision=...)``),
            ``max_model_turns``, ``cancelled``, ``error`` or ``unknown``.
        usage: summed token usage of the turn's model calls (``input_tokens``, ``output_tokens``, ``total_tokens``).
        error: ``{"type", "message"}`` when ``stop_reason == "error"``, else ``None``.
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


def _check_input(input: Any, decision: Any, decisions: Any) -> None:
    if input is not None and (decision is not None or decisions is not None):
        raise UserError("prompt(): pass either `input` (a new message) or `decision`/`decisions`, not both.")
    if input is None and decision is None and decisions is None:
        raise UserError("prompt(): nothing to send. Pass `input` (a message) or `decision=` for a waiting approval.")
    if input is not None and not isinstance(input, str):
        raise UserError(f"prompt(input=...) must be a str (it is stored as JSON), got {type(input).__name__}.")


class Turn:
    """One prompt and everything the agent does to answer it; iterate it for its chunks (sync or async).

    Attributes:
        session_id: the session.
        id: the turn's id.
        message_id: the prompt's message id (given or generated).
        repeated: the prompt repeated a ``message_id``; this follows the original turn.
    """

    def __init__(self, session: Session, turn_id: str, message_id: str, repeated: bool, after: int) -> None:
        self._session = session
        self.session_id = session.id
        self.id = turn_id
        self.message_id = message_id
        self.repeated = repeated
        self._after = after

    def __repr__(self) -> str:
        return f"Turn(session_id={self.session_id!r}, id={self.id!r}, message_id={self.message_id!r})"

    def _start(self) -> int:
        row = self._session._store.turn(self.id)
        return self._after if row is None or row.first_cursor is None else min(self._after, row.first_cursor - 1)

    def __iter__(self) -> Iterator[StreamChunk]:
        for line in self._session._follow(self._start(), turn_id=self.id):
            chunk = line["chunk"]
            if not (isinstance(chunk, dict) and chunk.get("kind") in _TURN_EVENTS):
                yield chunk

    async def __aiter__(self) -> AsyncIterator[StreamChunk]:
        async for line in self._session._afollow(self._start(), turn_id=self.id):
            chunk = line["chunk"]
            if not (isinstance(chunk, dict) and chunk.get("kind") in _TURN_EVENTS):
                yield chunk

    def _result(self) -> TurnResult | None:
        row = self._session._store.turn(self.id)
        if row is None or row.status != "ended":
            return None
        stored = row.result or {}
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
        waited = 0.0
        while True:
            seen = signal.version(self.session_id)
            result = self._result()
            if result is not None:
                return result
            if timeout is not None and waited >= timeout:
                raise TimeoutError(f"Turn {self.id!r} did not end within {timeout} s.")
            yield Step(signal.wait, signal.await_version, (self.session_id, seen, store.poll_seconds))
            waited += store.poll_seconds

    _result_sync, aresult = twins(_wait, "result")

    def result(self, timeout: float | None = None) -> TurnResult:
        """Wait for the turn to end (it runs whether or not anyone iterates it).

        Raises:
            TimeoutError: when ``timeout`` seconds pass first.
        """
        self._session._check_sync("turn.result()", "`await turn.aresult()`")
        return self._result_sync(timeout)


class Session:
    """One durable conversation of an agent; get it with ``agent.session(session_id=None, context=...)``.

    Attributes:
        id: the session id.
    """

    def __init__(self, agent: Any, store: SessionStore, name: str, session_id: str | None, context: Any) -> None:
        import uuid

        self._agent = agent
        self._store = store
        self._name = name
        if session_id is None:
            session_id = uuid.uuid4().hex
        else:
            check_id(session_id, "session_id")
            owner = store.owner_of(session_id)
            if owner is not None and owner != name:
                raise UserError(
                    f"Session {session_id!r} belongs to the agent named {owner!r}, not {name!r}. Open it from an "
                    f"agent with name={owner!r} (a session keeps the name of the agent that created it)."
                )
        self.id = session_id
        self._context = context
        if context is not None:
            store.engine.contexts[session_id] = context

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, agent={self._name!r})"

    # --- prompting ---------------------------------------------------------------------------------------

    def _accept(self, input: Any, message_id: str | None, decision: Any, decisions: Any) -> Turn:
        _check_input(input, decision, decisions)
        if message_id is not None:
            check_id(message_id, "message_id")
        store = self._store
        if input is None and not store.busy(self.id):
            state = self._agent.graph.get_state({"configurable": {"thread_id": self.id}})
            if not state.interrupts:
                raise UserError(
                    f"Session {self.id!r} has no approval waiting, so there is nothing to decide; "
                    "send a message with prompt(input) instead."
                )
            to_resume(decision, decisions, pending=state.interrupts)  # a bad answer fails here, before it is stored
        # Redact before the first write (guardrails): the turn payload and the inputs table get the redacted text.
        payload: dict[str, Any] = {"input": self._agent._redact_input(input)} if input is not None else {}
        if decision is not None:
            payload["decision"] = decision
        if decisions is not None:
            payload["decisions"] = list(decisions) if not isinstance(decisions, Mapping) else dict(decisions)
        turn_id, message_id, repeated, last = store.accept_prompt(self.id, self._name, message_id, payload)
        if self._context is not None:
            store.engine.contexts[turn_id] = self._context
        return Turn(self, turn_id, message_id, repeated, last)

    def _prompt(
        self,
        input: str | None = None,
        *,
        message_id: str | None = None,
        decision: Decision | None = None,
        decisions: Sequence[Decision] | Mapping[str, Decision] | None = None,
    ) -> Flow[Turn]:
        """Store a prompt (or a decision for a waiting approval) and start its turn; returns once stored.

        Args:
            input: the user's message.
            message_id: the caller's id for this input (1-128 of letters, digits, ``.``, ``_``, ``-``); a repeat
                runs nothing new and returns the original turn.
            decision: the answer to a waiting approval (as for ``Agent.invoke``).
            decisions: one answer per waiting item.

        Raises:
            UserError: bad input or ids, a decision with no approval waiting, or another agent's session.
            MessageIdInUseError: ``message_id`` already names a steer.
        """
        turn: Turn = yield Step(self._accept, self._aaccept, (input, message_id, decision, decisions))
        yield Step(self._kick, self._akick)
        return turn

    prompt, aprompt = twins(_prompt, "prompt", "Async twin of `prompt` (iterate the turn with ``async for``).")

    async def _aaccept(self, input: Any, message_id: str | None, decision: Any, decisions: Any) -> Turn:
        if self._store.kind == "postgres":
            return await asyncio.to_thread(self._accept, input, message_id, decision, decisions)
        return self._accept(input, message_id, decision, decisions)

    def _kick(self) -> None:
        self._store.engine.kick(self.id)

    async def _akick(self) -> None:
        self._store.engine.kick(self.id, here=True)  # the turn runs as a task on this loop

    def steer(self, text: str, *, message_id: str | None = None) -> str:
        """Store a steer: it joins the running turn before its next model call, or becomes the next turn.

        Returns:
            The steer's message id (given or generated).

        Raises:
            UserError: empty text, more than 64 KiB, 64 steers already waiting, or a bad id.
            MessageIdInUseError: ``message_id`` already names a prompt.
        """
        if not isinstance(text, str) or not text.strip():
            raise UserError(f"steer(text) needs a non-empty str, got {text!r}.")
        size = len(text.encode("utf-8"))
        if size > MAX_STEER_BYTES:
            raise UserError(f"steer(text) is {size} bytes; a steer holds at most 64 KiB ({MAX_STEER_BYTES} bytes).")
        if message_id is not None:
            check_id(message_id, "message_id")
        text = self._agent._redact_input(text)  # redact before the first write (guardrails)
        message_id, turn_id = self._store.accept_steer(self.id, self._name, message_id, text)
        if turn_id is not None and self._context is not None:
            self._store.engine.contexts[turn_id] = self._context
        self._store.engine.kick(self.id)
        return message_id

    def cancel(self) -> None:
        """Cancel the running turn (and the queued ones): each ends with stop reason ``cancelled``."""
        self._store.request_cancel(self.id)
        self._store.engine.cancel(self.id)
        self._store.engine.kick(self.id)

    def history(self) -> list[BaseMessage]:
        """The thread's messages."""
        state = self._agent.graph.get_state({"configurable": {"thread_id": self.id}})
        values = state.values if isinstance(state.values, Mapping) else {}
        return list(values.get("messages", []))

    # --- reading -----------------------------------------------------------------------------------------

    def _continue_if_orphaned(self, *, here: bool = False) -> None:
        store = self._store
        if store.busy(self.id) and store.lease_free(self.id):
            store.engine.kick(self.id, here=here)

    def stream(self, cursor: int = 0) -> Iterator[StreamLine]:
        """Every stored line after ``cursor`` as ``{"cursor", "chunk"}``, then new ones live until idle.

        Any process sharing the store can serve it; ``StreamResponse(s.stream(cursor))`` is a reconnect route.
        """
        if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
            raise UserError(f"stream(cursor) needs an int >= 0 (the last cursor you read), got {cursor!r}.")
        self._continue_if_orphaned()
        return self._follow(cursor)

    def astream(self, cursor: int = 0) -> AsyncIterator[StreamLine]:
        """Async twin of `stream`."""
        if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
            raise UserError(f"astream(cursor) needs an int >= 0 (the last cursor you read), got {cursor!r}.")
        return self._afollow(cursor)

    def _rows(self, after: int, turn_id: str | None) -> tuple[list[StreamLine], int, bool]:
        rows = self._store.read(self.id, after)
        out: list[StreamLine] = []
        ended = False
        for cursor, row_turn, line in rows:
            after = cursor
            if turn_id is not None and row_turn != turn_id:
                continue
            chunk = loads(line)
            out.append({"cursor": cursor, "chunk": chunk})
            if turn_id is not None and isinstance(chunk, dict) and chunk.get("kind") == "turn_end":
                ended = True
                break
        return out, after, ended

    def _idle(self, turn_id: str | None) -> bool:
        if turn_id is None:
            return not self._store.busy(self.id)
        row = self._store.turn(turn_id)
        return row is None  # an ended turn is recognised by its turn_end line

    def _check_sync(self, what: str, twin: str) -> None:
        if self._store.engine.runs_here(self.id):
            raise UserError(
                f"{what} would block the event loop that runs this session's turn (it was prompted with aprompt "
                f"on this loop); use {twin} instead."
            )

    # The body yields whole batches of lines (one per read), so the sync/async driver runs once per read, not
    # once per line (a 10,000-line replay is bounded by this loop).
    def _lines(self, after: int, turn_id: str | None, here: bool) -> Generator[list[StreamLine] | Step[Any], Any, None]:
        store = self._store
        signal = store.engine.signal
        waits = 0
        while True:
            seen = signal.version(self.id)
            lines, after, ended = self._rows(after, turn_id)
            if lines:
                yield lines
            if ended:
                return
            if lines:
                continue
            if self._idle(turn_id):
                lines, after, _ = self._rows(after, turn_id)
                if not lines:
                    return
                yield lines
                continue
            waits += 1
            if waits % 10 == 0:
                self._continue_if_orphaned(here=here)  # its worker may have died while we follow: take over
            yield Step(signal.wait, signal.await_version, (self.id, seen, store.poll_seconds))

    def _follow(self, after: int, *, turn_id: str | None = None) -> Iterator[StreamLine]:
        self._check_sync("Iterating synchronously", "`async for`")
        for lines in iterate(self._lines(after, turn_id, here=False)):
            yield from lines

    async def _afollow(self, after: int, *, turn_id: str | None = None) -> AsyncIterator[StreamLine]:
        self._continue_if_orphaned(here=True)
        async for lines in aiterate(self._lines(after, turn_id, here=True)):
            for line in lines:
                yield line
