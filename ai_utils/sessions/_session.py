"""`Session`: the public face of one durable conversation (SPEC §14, §14b).

Accepting (``prompt``, ``steer``, ``cancel``, ``resume``) is one store transaction in the caller's thread; the
turn then runs on the store's background worker (`_engine.Engine`). Reading (iterating a turn, ``stream``,
``result``) follows the stored log: lines already stored first, then new ones as they are stored (woken at
once in this process and, on Postgres, from others; polled from other processes on SQLite).
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from typing import Any, Literal, get_args

from langchain_core.messages import BaseMessage

from ai_utils.client import Decision, StreamLine
from ai_utils.exceptions import UserError
from ai_utils.memory._methods import Flow, Step, aiterate, iterate, twins
from ai_utils.sessions._content import prepare
from ai_utils.sessions._engine import steered
from ai_utils.sessions._inputs import Accepted, check_config
from ai_utils.sessions._schema import MAX_STEER_BYTES, SessionConfig, check_cursor, check_id, loads, shown
from ai_utils.sessions._store import SessionStore
from ai_utils.sessions._turn import StopReason, Turn, TurnResult
from ai_utils.streaming._decisions import to_resume

__all__ = ["OnBusy", "Session", "StopReason", "Turn", "TurnResult"]

OnBusy = Literal["enqueue", "reject", "interrupt", "rollback"]
"""What a prompt does while another turn of the session runs (double texting)."""

_ENDS = frozenset({"turn_end", "turn_yield"})


def _check_input(input: Any, decision: Any, decisions: Any) -> None:
    if input is not None and (decision is not None or decisions is not None):
        raise UserError("prompt(): pass either `input` (a new message) or `decision`/`decisions`, not both.")
    if input is None and decision is None and decisions is None:
        raise UserError("prompt(): nothing to send. Pass `input` (a message) or `decision=` for a waiting approval.")


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, or ``None`` when it is not a real number (an int too large for a float too)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _seconds(value: Any, what: str) -> float | None:
    if value is None:
        return None
    number = _finite(value)
    if number is None or number <= 0:
        raise UserError(f"{what} must be a positive number of seconds, got {shown(value)}; e.g. {what}=30.")
    return number


def _yield_at(value: Any) -> float | None:
    if value is None:
        return None
    at = _finite(value)
    if at is None:
        raise UserError(f"yield_at must be a unix time in seconds (e.g. time.time() + 50), got {shown(value)}.")
    if at <= time.time():
        raise UserError(
            f"yield_at={at!r} is in the past (now is {time.time():.3f}); pass a later unix time, "
            "e.g. time.time() + 50 for a function with a 60 s limit."
        )
    return at


def _redacted(agent: Any, input: Any) -> Any:
    """The user's input as it may be stored: the agent's input guards (guardrails) run before the first write.

    So the turn payload, the inputs table and a steer's replayed ``user_message`` line never hold a secret the
    user typed. Content blocks are redacted block by block (text blocks; images are kept as they are).
    """
    redact = getattr(agent, "_redact_input", None)  # the run path's input guards (none: nothing to redact)
    if redact is None or input is None:
        return input
    if isinstance(input, str):
        return redact(input)
    if isinstance(input, list):
        return [
            {**block, "text": redact(block["text"])}
            if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str)
            else block
            for block in input
        ]
    return input


def _on_busy(value: Any) -> str:
    if value not in get_args(OnBusy):
        raise UserError(
            f"on_busy={shown(value)} is not a strategy; use 'enqueue' (wait behind the running turn), 'reject', "
            "'interrupt' or 'rollback'."
        )
    return str(value)


class Session:
    """One durable conversation of an agent; get it with ``agent.session(session_id=None, context=...)``.

    Attributes:
        id: the session id.
    """

    def __init__(
        self,
        agent: Any,
        store: SessionStore,
        name: str,
        session_id: str | None,
        context: Any,
        config: SessionConfig | None = None,
    ) -> None:
        self._agent = agent
        self._store = store
        self._name = name
        self._config = config
        if session_id is None:
            session_id = uuid.uuid4().hex
        else:
            check_id(session_id, "session_id")
            row = store.session_row(session_id)
            if row is not None:
                if row[0] != name:
                    raise UserError(
                        f"Session {session_id!r} belongs to the agent named {row[0]!r}, not {name!r}. Open it from "
                        f"an agent with name={row[0]!r} (a session keeps the name of the agent that created it)."
                    )
                check_config(session_id, (row[1], row[2]), config)
        self.id = session_id
        # Bound to this object: only the turns it starts (or continues after a crash) get it, never stored.
        self._context = context

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, agent={self._name!r})"

    # --- prompting ---------------------------------------------------------------------------------------

    def _payload(
        self, input: Any, decision: Any, decisions: Any, timeout: Any, yield_at: Any
    ) -> tuple[dict[str, Any], bool]:
        """The stored prompt besides its input (checked), and whether it answers an approval."""
        _check_input(input, decision, decisions)
        payload: dict[str, Any] = {}
        seconds = _seconds(timeout, "timeout")
        if seconds is not None:
            payload["timeout"] = seconds
            payload["deadline"] = time.time() + seconds
        at = _yield_at(yield_at)
        if at is not None:
            payload["yield_at"] = at
        if decision is not None:
            payload["decision"] = decision
        if decisions is not None:
            payload["decisions"] = list(decisions) if not isinstance(decisions, Mapping) else dict(decisions)
        return payload, input is None

    def _accept(self, payload: dict[str, Any], deciding: bool, message_id: str | None, on_busy: str) -> Turn:
        store = self._store
        if deciding and not store.busy(self.id):
            state = self._agent.graph.get_state({"configurable": {"thread_id": self.id}})
            if not state.interrupts:
                raise UserError(
                    f"Session {self.id!r} has no approval waiting, so there is nothing to decide; "
                    "send a message with prompt(input) instead."
                )
            # A bad answer fails here, before it is stored.
            to_resume(payload.get("decision"), payload.get("decisions"), pending=state.interrupts)
        turn_id = uuid.uuid4().hex
        if self._context is not None:
            # Before the turn is stored: a worker of this process may start it the moment it is (one ending the
            # turn ahead of it reads the next turn in the same transaction).
            store.engine.contexts[turn_id] = self._context
        try:
            accepted: Accepted = store.accept_prompt(
                self.id, self._name, message_id, payload, on_busy=on_busy, config=self._config, turn_id=turn_id
            )
        except BaseException:
            store.engine.contexts.pop(turn_id, None)
            raise
        if accepted.repeated:
            store.engine.contexts.pop(turn_id, None)
        else:
            if self._context is not None:
                # A turn this prompt continues (a yielded one, or the one a dead worker was running) runs with the
                # context of this object, as when stream() or resume() continue it; a live turn keeps its own.
                for earlier in accepted.continued:
                    store.engine.contexts.setdefault(earlier, self._context)
            if on_busy in ("interrupt", "rollback"):
                store.engine.cancel(self.id, before=accepted.seq)  # at once when this process runs the turn
        self._agent._sessions_link.events.emit(
            "turn.accepted",
            session_id=self.id,
            turn_id=accepted.turn_id,
            message_id=accepted.message_id,
            repeated=accepted.repeated,
            on_busy=on_busy,
        )
        return Turn(self, accepted.turn_id, accepted.message_id, accepted.repeated, accepted.last_cursor)

    async def _aaccept(self, payload: dict[str, Any], deciding: bool, message_id: str | None, on_busy: str) -> Turn:
        if self._store.kind == "postgres":
            return await asyncio.to_thread(self._accept, payload, deciding, message_id, on_busy)
        return self._accept(payload, deciding, message_id, on_busy)

    def _prompt(
        self,
        input: str | Sequence[Mapping[str, Any]] | None = None,
        *,
        message_id: str | None = None,
        decision: Decision | None = None,
        decisions: Sequence[Decision] | Mapping[str, Decision] | None = None,
        timeout: float | None = None,
        yield_at: float | None = None,
        on_busy: OnBusy = "enqueue",
    ) -> Flow[Turn]:
        """Store a prompt (or a decision for a waiting approval) and start its turn; returns once stored.

        Args:
            input: the user's message: a ``str`` or a list of content blocks (``{"type": "text", "text"}``,
                ``{"type": "image", "data": <canonical base64 str> | bytes, "mime_type"}``, ``{"type":
                "image_url", "url": "data:image/...;base64,..."}``; at most 8 PNG/JPEG/GIF/WebP images,
                3.75 MiB each, 6 MiB together — the agent's ``resize_image`` runs on each first).
            message_id: the caller's id for this input (1-128 of letters, digits, ``.``, ``_``, ``-``); a repeat
                runs nothing new and returns the original turn.
            decision: the answer to a waiting approval (as for ``Agent.invoke``).
            decisions: one answer per waiting item.
            timeout: cancel the turn this many seconds after ``prompt()`` returns (stop reason ``cancelled``,
                ``error["type"] == "TimeoutError"``).
            yield_at: a unix time: the turn stops before its next model call after it (stop reason
                ``yielded``); the next prompt or `resume` continues it.
            on_busy: while another turn of the session runs (in any process): ``"enqueue"`` waits behind it,
                ``"reject"`` raises `SessionBusyError` and stores nothing, ``"interrupt"`` cancels it (its open
                tool calls answered), ``"rollback"`` cancels it and removes its messages from the thread.

        Raises:
            UserError: bad input, ids or options, a decision with no approval waiting, or another agent's session.
            SessionBusyError: ``on_busy="reject"`` and a turn runs.
            MessageIdInUseError: ``message_id`` already names a steer.
        """
        if message_id is not None:
            check_id(message_id, "message_id")
        payload, deciding = self._payload(input, decision, decisions, timeout, yield_at)
        mode = _on_busy(on_busy)
        if input is not None:
            payload["input"] = yield from prepare(
                _redacted(self._agent, input), self._agent._sessions_link.resize_image
            )
        turn: Turn = yield Step(self._accept, self._aaccept, (payload, deciding, message_id, mode))
        yield Step(self._kick, self._akick)
        return turn

    prompt, aprompt = twins(_prompt, "prompt", "Async twin of `prompt` (iterate the turn with ``async for``).")

    def _resume(self, *, yield_at: float | None = None) -> Flow[Turn]:
        """Continue the turn that stopped at its ``yield_at`` (stop reason ``yielded``), without a resume note.

        Args:
            yield_at: a new unix time to stop at (as for `prompt`).

        Returns:
            A `Turn` that follows the rest of the continued turn.

        Raises:
            UserError: no turn of the session is yielded, or a bad ``yield_at``.
        """
        at = _yield_at(yield_at)
        resumed = self._store.resume_yielded(self.id, self._name, at)
        if resumed is None:
            raise UserError(f"Session {self.id!r} has no yielded turn to resume; prompt() sends a new message instead.")
        turn_id, message_id, last = resumed
        row = self._store.turn(turn_id)
        ends = int(((row.result if row is not None else None) or {}).get("ends", 0))
        if self._context is not None:
            self._store.engine.contexts[turn_id] = self._context
        turn = Turn(self, turn_id, message_id, False, last, ends_seen=ends, continued=True)
        yield Step(self._kick, self._akick)
        return turn

    resume, aresume = twins(_resume, "resume", "Async twin of `resume`.")

    def _kick(self) -> None:
        self._store.engine.kick(self.id, owner=self._name)

    async def _akick(self) -> None:
        self._store.engine.kick(self.id, owner=self._name, here=True)  # the turn runs as a task on this loop

    def steer(self, text: str, *, message_id: str | None = None) -> str:
        """Store a steer: it joins the running turn before its next model call, or becomes the next turn.

        Returns:
            The steer's message id (given or generated).

        Raises:
            UserError: empty text, more than 64 KiB, 64 steers already waiting, or a bad id.
            MessageIdInUseError: ``message_id`` already names a prompt.
        """
        if not isinstance(text, str) or not text.strip():
            raise UserError(f"steer(text) needs a non-empty str, got {shown(text)}.")
        size = len(text.encode("utf-8"))
        if size > MAX_STEER_BYTES:
            raise UserError(f"steer(text) is {size} bytes; a steer holds at most 64 KiB ({MAX_STEER_BYTES} bytes).")
        if message_id is not None:
            check_id(message_id, "message_id")
        text = _redacted(self._agent, text)  # before the first write: the steer's row and its user_message line
        message_id, turn_id, continued = self._store.accept_steer(self.id, self._name, message_id, text, self._config)
        self._store.engine.signal.publish(steered(self.id))  # a turn running here looks at its next model call
        if self._context is not None:
            # A steer that becomes a turn (now, or later from the queue) runs with this object's context, and so
            # does the yielded turn it continues (as when this object's prompt() or resume() continues it).
            self._store.engine.contexts[turn_id or f"steer:{message_id}"] = self._context
            for continued_id in continued:
                self._store.engine.contexts.setdefault(continued_id, self._context)
        self._store.engine.kick(self.id, owner=self._name)
        return message_id

    def cancel(self) -> None:
        """Cancel the running turn (and the queued ones): each ends with stop reason ``cancelled``."""
        self._store.request_cancel(self.id)
        self._store.engine.cancel(self.id)
        self._store.engine.kick(self.id, owner=self._name)

    def history(self) -> list[BaseMessage]:
        """The thread's messages."""
        state = self._agent.graph.get_state({"configurable": {"thread_id": self.id}})
        values = state.values if isinstance(state.values, Mapping) else {}
        return list(values.get("messages", []))

    # --- reading -----------------------------------------------------------------------------------------

    def _continue_if_orphaned(self, *, here: bool = False) -> None:
        store = self._store
        if store.busy(self.id) and store.lease_free(self.id):
            if self._context is not None:
                # The caller continuing a crashed turn supplies its context (SPEC §14b); a queued turn gets none.
                for turn_id in store.crashed_turns(self.id):
                    store.engine.contexts.setdefault(turn_id, self._context)
            store.engine.kick(self.id, owner=self._name, here=here)

    def stream(self, cursor: int = 0) -> Iterator[StreamLine]:
        """Every stored line after ``cursor`` as ``{"cursor", "chunk"}``, then new ones live until idle.

        Any process sharing the store can serve it; ``StreamResponse(s.stream(cursor))`` is a reconnect route.

        Raises:
            UserError: ``cursor`` is not an int from 0 to 2**63 - 1 (past the end replays nothing).
        """
        check_cursor(cursor, "stream(cursor)")
        self._continue_if_orphaned()
        return self._follow(cursor)

    def astream(self, cursor: int = 0) -> AsyncIterator[StreamLine]:
        """Async twin of `stream`."""
        check_cursor(cursor, "astream(cursor)")
        return self._afollow(cursor)

    def _rows(self, after: int, turn_id: str | None) -> tuple[list[StreamLine], int, bool]:
        if turn_id is None:  # the whole log (a replay reads thousands of lines: one comprehension, no turn ids)
            lines = self._store.read_lines(self.id, after)
            if not lines:
                return [], after, False
            return [{"cursor": cursor, "chunk": loads(line)} for cursor, line in lines], lines[-1][0], False
        rows = self._store.read(self.id, after)
        out: list[StreamLine] = []
        ended = False
        for cursor, row_turn, line in rows:
            after = cursor
            if row_turn != turn_id:
                continue
            chunk = loads(line)
            out.append({"cursor": cursor, "chunk": chunk})
            if isinstance(chunk, dict) and chunk.get("kind") in _ENDS:
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
