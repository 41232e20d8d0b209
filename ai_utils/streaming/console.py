"""Console helpers: ``log_chunk`` prints stream chunks readably, ``session``/``asession`` run a chat loop."""

from __future__ import annotations

import contextlib
import json
import weakref
from collections.abc import Iterator
from datetime import datetime
from typing import Any, cast

import anyio.to_thread

from ai_utils._optional import missing_extra
from ai_utils.client import (
    Decision,
    InterruptEvent,
    is_action_event,
    is_custom_event,
    is_error_event,
    is_follow_up_event,
    is_interrupt,
    is_interrupt_batch,
    is_reasoning_event,
    is_subagent_event,
    is_tool_event,
)
from ai_utils.exceptions import AiUtilsError

try:
    from rich.console import Console
    from rich.text import Text
except ImportError as _import_error:
    raise missing_extra("rich", extra="server", feature="log_chunk() and session()") from _import_error

__all__ = ["asession", "log_chunk", "parse_decision", "session"]

_APPROVE = frozenset({"approve", "ja", "ok", "yes", "y"})
_REJECT = frozenset({"reject", "nein", "no", "n"})
_HINT = "Answer with approve / ja / ok, reject, reject: <reason>, edit: {json args} or respond: <text>."


class _Printer:
    """Remembers what kind of output is open on one console, so events start on their own line."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.mode: object = None  # None = at line start; "text", "reasoning" or a subagent namespace key

    def inline(self, mode: object, text: str, style: str = "", prefix: Text | None = None) -> None:
        if self.mode != mode:
            if self.mode is not None:
                self.console.print()
            if prefix is not None:
                self.console.print(prefix, end="")
            self.mode = mode
        self.console.print(Text(text, style=style), end="", soft_wrap=True)

    def line(self, text: Text) -> None:
        if self.mode is not None:
            self.console.print()
            self.mode = None
        self.console.print(text, soft_wrap=True)

    def end(self) -> None:
        if self.mode is not None:
            self.console.print()
            self.mode = None


_printers: weakref.WeakKeyDictionary[Console, _Printer] = weakref.WeakKeyDictionary()
_default_console: Console | None = None


def _printer(console: Console | None) -> _Printer:
    global _default_console
    if console is None:
        if _default_console is None:
            # force_jupyter=False: in a notebook rich would render every print as its own HTML block, putting
            # each streamed word on its own line; plain text into the cell's output stream flows as it arrives.
            _default_console = Console(highlight=False, force_jupyter=False)
        console = _default_console
    printer = _printers.get(console)
    if printer is None:
        printer = _printers[console] = _Printer(console)
    return printer


_RESULT_CHARS = 200


def _result(output: object) -> Text:
    """A tool result on one line, cut to a readable length."""
    if output is None or output == "":
        return Text("")
    text = " ".join(str(output).split())
    if len(text) > _RESULT_CHARS:
        text = text[: _RESULT_CHARS - 1] + "…"
    return Text(f" → {text}", "dim")


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _interrupt_lines(item: InterruptEvent) -> Text:
    text = Text.assemble(("[interrupt] ", "bold yellow"), item["question"] or "(no question)")
    if item["tool_name"]:
        text.append(f"\n  tool: {item['tool_name']} {_json(item['args'] or {})}", style="yellow")
    if item["decisions"]:
        text.append(f"\n  decisions: {', '.join(item['decisions'])}", style="yellow")
    return text


def log_chunk(chunk: Any, *, console: Console | None = None) -> None:
    """Print one stream chunk readably.

    Text is printed as it comes; tool events as ``[tool:start] name {args}`` / ``[tool:end] name → result``;
    interrupts as ``[interrupt] question`` with the allowed decisions; reasoning dimmed after ``[reasoning]``; subagent
    text prefixed with the subagent's name or namespace; errors in red.

    Args:
        chunk: a ``StreamChunk``.
        console: the rich console to print to; a shared default console otherwise.
    """
    printer = _printer(console)
    if isinstance(chunk, str):
        printer.inline("text", chunk)
    elif is_reasoning_event(chunk):
        printer.inline("reasoning", chunk["text"], "dim italic", Text("[reasoning] ", "dim"))
    elif is_subagent_event(chunk):
        label = chunk.get("name") or "/".join(chunk["namespace"])
        printer.inline(("subagent", label), chunk["text"], "magenta", Text(f"[subagent:{label}] ", "bold magenta"))
    elif is_tool_event(chunk):
        if chunk["phase"] == "start":
            printer.line(
                Text.assemble(("[tool:start] ", "cyan"), chunk["tool_name"], " ", _json(chunk.get("args", {})))
            )
        elif chunk.get("status") == "error":
            printer.line(
                Text.assemble(("[tool:end] ", "red"), chunk["tool_name"], (f" error: {chunk.get('output', '')}", "red"))
            )
        else:
            printer.line(Text.assemble(("[tool:end] ", "cyan"), chunk["tool_name"], _result(chunk.get("output"))))
    elif is_interrupt(chunk):
        for item in chunk["items"] if is_interrupt_batch(chunk) else [cast(InterruptEvent, chunk)]:
            printer.line(_interrupt_lines(item))
    elif is_error_event(chunk):
        printer.line(Text(f"[error] {chunk['type']}: {chunk['message']}", "bold red"))
    elif is_custom_event(chunk):
        printer.line(Text.assemble(("[custom] ", "blue"), _json(chunk["data"])))
    elif is_action_event(chunk):
        printer.line(
            Text.assemble(("[action] ", "green"), f"{chunk['id']} ({chunk['status']}) ", _json(chunk["params"]))
        )
    elif is_follow_up_event(chunk):
        printer.line(Text.assemble(("[follow-up] ", "green"), chunk["text"]))
    else:
        printer.line(Text(repr(chunk)))


def parse_decision(answer: str) -> Decision | None:
    """Read a console answer to an interrupt.

    ``approve``/``ja``/``ok``/``yes`` -> ``"approve"``; ``reject``/``nein``/``no`` -> ``"reject"``;
    ``reject: <reason>`` -> ``{"type": "reject", "message": reason}``; ``edit: {"a": 1}`` ->
    ``{"type": "edit", "args": {...}}``; ``respond: <text>`` -> ``{"type": "respond", "message": text}``.

    Args:
        answer: the typed line.

    Returns:
        The decision, or ``None`` when the line is none of these.
    """
    word, sep, rest = answer.strip().partition(":")
    word, rest = word.strip().lower(), rest.strip()
    if not sep:
        if word in _APPROVE:
            return "approve"
        if word in _REJECT:
            return "reject"
        return None
    if word == "reject":
        return {"type": "reject", "message": rest} if rest else "reject"
    if word == "respond" and rest:
        return {"type": "respond", "message": rest}
    if word == "edit":
        try:
            args = json.loads(rest)
        except ValueError:
            return None
        return {"type": "edit", "args": args} if isinstance(args, dict) else None
    return None


class _Loop:
    """The session's state machine, shared by ``session`` and ``asession``: I/O stays in the shells."""

    def __init__(self, breakword: str, id: str | None, number_of_messages: int | None, is_deep_agent: bool) -> None:
        self.breakword = breakword.strip().lower()
        self.thread_id = id if id is not None else datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        self.left = number_of_messages
        self.is_deep_agent = is_deep_agent
        self.waiting = False  # an interrupt waits for a decision
        self.pending = 1  # its items: a batch takes one answer per item, typed one per line
        self.answers: list[Decision] = []
        self.stopped = False  # the breakword or the end of input

    @property
    def running(self) -> bool:
        return not self.stopped and (self.left is None or self.left > 0)

    def request(self, line: str) -> tuple[str | None, dict[str, Any]] | str | None:
        """The next ``stream`` call for a typed line; a str is a hint to print; None ends the session."""
        text = line.strip()
        if text.lower() == self.breakword:
            return None
        kwargs: dict[str, Any] = {"thread_id": self.thread_id}
        if self.is_deep_agent:
            kwargs["show_tool_calls"] = True
        if self.waiting:
            decision = parse_decision(text)
            if decision is None:
                return _HINT
            self.answers.append(decision)
            if len(self.answers) < self.pending:
                return f"(answer {len(self.answers) + 1} of {self.pending})"
            if self.pending == 1:
                kwargs["decision"] = decision
            else:
                kwargs["decisions"] = self.answers
            self.answers = []
            return None, kwargs
        if not text:
            return ""
        return text, kwargs

    def turn(self, out: Console, line: str | None) -> tuple[str | None, dict[str, Any]] | None:
        """A typed line (``None`` at the end of input): the ``(text, kwargs)`` stream call to make, or ``None``."""
        request = self.request(line) if line is not None else None
        if request is None:
            self.stopped = True
            return None
        if isinstance(request, str):
            if request:
                out.print(Text(request, "yellow"), soft_wrap=True)
            return None
        self.waiting = False
        if self.left is not None:
            self.left -= 1
        out.print(Text("Assistant: ", "bold blue"), end="")
        return request

    def show(self, out: Console, chunk: Any) -> None:
        if self.is_deep_agent and is_interrupt(chunk):
            self.waiting = True
            self.pending = len(chunk["items"]) if is_interrupt_batch(chunk) else 1
            self.answers = []
        log_chunk(chunk, console=out)

    @staticmethod
    def call(method: Any, request: tuple[str | None, dict[str, Any]]) -> Any:
        """``streamable.stream`` or ``.astream`` (``method``) called for a ``turn``'s request."""
        text, kwargs = request
        return method(text, **kwargs) if text is not None else method(**kwargs)

    @contextlib.contextmanager
    def answering(self, out: Console, request: tuple[str | None, dict[str, Any]]) -> Iterator[None]:
        """Around showing one answer: our errors are shown as an error line, and the answer's line is ended."""
        try:
            yield
        except AiUtilsError as exc:
            log_chunk({"kind": "error", "type": type(exc).__name__, "message": str(exc)}, console=out)
            # A refused decision: the interrupt still waits.
            self.waiting = "decision" in request[1] or "decisions" in request[1]
        _printer(out).end()


def _read_line(out: Console) -> str | None:
    """The next typed line, or ``None`` at the end of input."""
    try:
        return out.input(Text("You: ", "bold green"))
    except EOFError:
        return None


def session(
    streamable: Any,
    *,
    breakword: str = "exit",
    id: str | None = None,
    number_of_messages: int | None = None,
    is_deep_agent: bool = False,
    console: Console | None = None,
) -> None:
    """Chat with an agent in the console until ``breakword``, end of input or the round limit.

    Each line is sent with ``streamable.stream(line, thread_id=id)`` and the chunks are printed as
    they arrive (``log_chunk``). With ``is_deep_agent`` tool events are shown
    (``show_tool_calls=True``) and, after an interrupt, the next line is a decision: ``approve``,
    ``ja``, ``ok``, ``reject``, ``reject: <reason>`` (also ``edit: {json}``, ``respond: <text>``),
    sent as ``streamable.stream(thread_id=id, decision=...)``; a batch of several items takes one such line per
    item, in order, sent as ``decisions=[...]``.

    Args:
        streamable: an ``Agent``/``DeepAgent`` or any object with ``.stream(input, *, thread_id, ...)``.
        breakword: the line that ends the session.
        id: the thread id; a timestamp by default.
        number_of_messages: at most this many user/assistant rounds; unlimited by default.
        is_deep_agent: show tool events and ask for decisions after interrupts.
        console: the rich console to use; a default console otherwise.
    """
    out = console or Console(highlight=False)
    loop = _Loop(breakword, id, number_of_messages, is_deep_agent)
    while loop.running:
        request = loop.turn(out, _read_line(out))
        if request is not None:
            with loop.answering(out, request):
                for chunk in loop.call(streamable.stream, request):
                    loop.show(out, chunk)


async def asession(
    streamable: Any,
    *,
    breakword: str = "exit",
    id: str | None = None,
    number_of_messages: int | None = None,
    is_deep_agent: bool = False,
    console: Console | None = None,
) -> None:
    """Async twin of ``session``, with the same arguments: uses ``streamable.astream(...)``.

    ``streamable`` needs ``.astream(input, *, thread_id, ...)``; each line is read in a worker thread.
    """
    out = console or Console(highlight=False)
    loop = _Loop(breakword, id, number_of_messages, is_deep_agent)
    while loop.running:
        request = loop.turn(out, await anyio.to_thread.run_sync(_read_line, out))
        if request is not None:
            with loop.answering(out, request):
                async for chunk in loop.call(streamable.astream, request):
                    loop.show(out, chunk)
