from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from rich.console import Console

from ai_utils.exceptions import UserError
from ai_utils.streaming import asession, log_chunk, parse_decision, session
from ai_utils.streaming._adapter import ChunkAdapter, adapt, stream_kwargs
from ai_utils.streaming._decisions import to_resume

START = {"kind": "tool", "phase": "start", "tool_name": "send_email", "id": "c1", "args": {"to": "bob"}}
END = {"kind": "tool", "phase": "end", "tool_name": "send_email", "id": "c1", "output": "sent", "status": "success"}
ASK = {
    "kind": "interrupt",
    "id": "i1",
    "question": "Send it?",
    "decisions": ["approve", "reject"],
    "tool_name": "send_email",
    "args": {"to": "bob"},
}


def plain_console() -> Console:
    return Console(file=io.StringIO(), width=200, color_system=None, highlight=False)


def printed(console: Console) -> str:
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_log_chunk_prints_every_kind_of_chunk_readably() -> None:
    console = plain_console()
    chunks: list[Any] = [
        {"kind": "reasoning", "text": "thinking "},
        {"kind": "reasoning", "text": "hard"},
        "Hello ",
        "world.",
        START,
        END,
        {**END, "status": "error", "output": "smtp down"},
        {"kind": "subagent", "text": "Looking ", "namespace": ["tools:1"], "name": "researcher"},
        {"kind": "subagent", "text": "up.", "namespace": ["tools:1"], "name": "researcher"},
        {"kind": "subagent", "text": "Anonymous.", "namespace": ["tools:2", "model:3"]},
        ASK,
        {
            "kind": "interrupt",
            "items": [
                {**ASK, "id": "i:0"},
                {**ASK, "id": "i:1", "question": "", "decisions": [], "tool_name": None, "args": None},
            ],
        },
        {"kind": "error", "type": "ProviderError", "message": "down"},
        {"kind": "something-new"},
    ]
    for chunk in chunks:
        log_chunk(chunk, console=console)

    assert printed(console).splitlines() == [
        "[reasoning] thinking hard",
        "Hello world.",
        '[tool:start] send_email {"to": "bob"}',
        "[tool:end] send_email → sent",
        "[tool:end] send_email error: smtp down",
        "[subagent:researcher] Looking up.",
        "[subagent:tools:2/model:3] Anonymous.",
        "[interrupt] Send it?",
        '  tool: send_email {"to": "bob"}',
        "  decisions: approve, reject",
        "[interrupt] Send it?",
        '  tool: send_email {"to": "bob"}',
        "  decisions: approve, reject",
        "[interrupt] (no question)",
        "[error] ProviderError: down",
        "{'kind': 'something-new'}",
    ]


def test_log_chunk_styles_reasoning_dim_and_works_without_a_console(capsys: pytest.CaptureFixture[str]) -> None:
    console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system="standard")
    log_chunk({"kind": "reasoning", "text": "hmm"}, console=console)
    log_chunk("Hi there", console=None)

    assert "\x1b[2;3m" in printed(console)  # dim italic
    assert "Hi there" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("line", "decision"),
    [
        ("approve", "approve"),
        ("ja", "approve"),
        ("OK", "approve"),
        (" yes ", "approve"),
        ("reject", "reject"),
        ("nein", "reject"),
        ("reject:", "reject"),
        ("reject: too expensive", {"type": "reject", "message": "too expensive"}),
        ('edit: {"to": "alice"}', {"type": "edit", "args": {"to": "alice"}}),
        ("respond: Bob is away", {"type": "respond", "message": "Bob is away"}),
        ("edit: to=alice", None),
        ("edit: [1]", None),
        ("respond:", None),
        ("maybe", None),
        ("later: x", None),
    ],
)
def test_console_answers_become_decisions(line: str, decision: Any) -> None:
    assert parse_decision(line) == decision


class ScriptedAgent:
    """A stand-in for the user's agent: replays one chunk list per stream() call and records the calls."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.calls: list[tuple[str | None, dict[str, Any]]] = []

    def _next(self, input: str | None, kwargs: dict[str, Any]) -> list[Any]:
        self.calls.append((input, kwargs))
        turn = self.turns.pop(0)
        if isinstance(turn, Exception):
            raise turn
        return turn

    def stream(self, input: str | None = None, **kwargs: Any) -> Iterator[Any]:
        yield from self._next(input, kwargs)

    async def astream(self, input: str | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        for chunk in self._next(input, kwargs):
            yield chunk


@pytest.fixture
def type_lines(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    def type_(text: str) -> None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(text))

    return type_


def test_a_session_sends_each_line_on_one_thread_until_the_breakword(type_lines: Callable[[str], None]) -> None:
    agent = ScriptedAgent(["Hello", "!"], ["Fine."])
    console = plain_console()
    type_lines("hi\n\nhow are you?\nEXIT\nnever sent\n")

    session(agent, id="dev-1", console=console)

    assert agent.calls == [("hi", {"thread_id": "dev-1"}), ("how are you?", {"thread_id": "dev-1"})]
    assert printed(console) == "You: Assistant: Hello!\nYou: You: Assistant: Fine.\nYou: "


def test_a_deep_agent_session_shows_tools_and_waits_for_a_decision(type_lines: Callable[[str], None]) -> None:
    agent = ScriptedAgent([START, ASK], [END, "Done."])
    console = plain_console()
    type_lines("mail bob\nmaybe\nreject: wrong person\nexit\n")
    agent.turns[1] = [{**END, "status": "error", "output": "rejected"}, "Ok, not sent."]

    session(agent, id="t", is_deep_agent=True, console=console)

    assert agent.calls == [
        ("mail bob", {"thread_id": "t", "show_tool_calls": True}),
        (None, {"thread_id": "t", "show_tool_calls": True, "decision": {"type": "reject", "message": "wrong person"}}),
    ]
    out = printed(console)
    assert "[tool:start] send_email" in out and "[interrupt] Send it?" in out
    assert "Answer with approve" in out  # the unreadable answer 'maybe' was not sent
    assert out.endswith("Ok, not sent.\nYou: ")


def test_without_deep_agent_mode_an_answer_after_an_interrupt_is_a_new_message(
    type_lines: Callable[[str], None],
) -> None:
    agent = ScriptedAgent([ASK], ["Sure."])
    type_lines("mail bob\napprove\n")

    session(agent, id="t", console=plain_console())

    assert agent.calls[1] == ("approve", {"thread_id": "t"})


def test_a_session_stops_after_number_of_messages_rounds(type_lines: Callable[[str], None]) -> None:
    agent = ScriptedAgent(["a"], ["b"], ["c"])
    type_lines("1\n2\n3\n")

    session(agent, number_of_messages=2, console=plain_console())

    assert [c[0] for c in agent.calls] == ["1", "2"]
    assert agent.calls[0][1]["thread_id"] == agent.calls[1][1]["thread_id"]  # default id: one timestamp
    assert agent.calls[0][1]["thread_id"][:2] == "20"


def test_an_error_is_shown_and_the_session_keeps_waiting_for_a_valid_decision(
    type_lines: Callable[[str], None],
) -> None:
    agent = ScriptedAgent([ASK], UserError("Decision 'reject' is not allowed"), ["Sent."])
    console = plain_console()
    type_lines("mail\nreject\nok\n")

    session(agent, id="t", is_deep_agent=True, console=console)

    assert [c[1].get("decision") for c in agent.calls] == [None, "reject", "approve"]
    assert "[error] UserError: Decision 'reject' is not allowed" in printed(console)


async def test_the_async_session_follows_the_same_flow(type_lines: Callable[[str], None]) -> None:
    agent = ScriptedAgent([START, ASK], ["Done."], UserError("boom"))
    console = plain_console()
    type_lines("mail bob\nja\nmore\nexit\n")

    await asession(agent, id="t", is_deep_agent=True, console=console)

    assert agent.calls[:2] == [
        ("mail bob", {"thread_id": "t", "show_tool_calls": True}),
        (None, {"thread_id": "t", "show_tool_calls": True, "decision": "approve"}),
    ]
    assert "[error] UserError: boom" in printed(console)


async def test_the_async_session_ends_at_end_of_input_and_skips_blank_and_unreadable_lines(
    type_lines: Callable[[str], None],
) -> None:
    agent = ScriptedAgent([ASK], ["x"])
    console = plain_console()
    type_lines("\nhi\nhmm\nno\n")

    await asession(agent, id="t", is_deep_agent=True, number_of_messages=5, console=console)

    assert [c[1].get("decision") for c in agent.calls] == [None, "reject"]
    assert "Answer with approve" in printed(console)


class GraphAgent:
    """The smallest user-side streamable over a real create_agent graph (what Agent does, minus validation)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def stream(
        self, input: str | None = None, *, thread_id: str, decision: Any = None, show_tool_calls: bool = False
    ) -> Iterator[Any]:
        config = {"configurable": {"thread_id": thread_id}}
        if decision is not None:
            inputs: Any = to_resume(decision, pending=self.graph.get_state(config).interrupts)
        else:
            inputs = {"messages": [("user", input)]}
        parts = self.graph.stream(inputs, config, **stream_kwargs())
        return adapt(parts, ChunkAdapter(show_tool_calls=show_tool_calls))


def test_a_session_drives_a_real_agent_through_approval(
    type_lines: Callable[[str], None], make_graph: Callable[..., Any], outbox: Any
) -> None:
    graph = make_graph(
        [
            {"content": "Mailing.", "tool_calls": [{"name": "send_email", "args": {"to": "bob", "body": "hi"}}]},
            "Mail sent.",
        ],
        interrupt_on={"send_email": {"allowed_decisions": ["approve", "reject"], "description": "Send it?"}},
    )
    console = plain_console()
    type_lines("mail bob\nok\nexit\n")

    session(GraphAgent(graph), id="u1", is_deep_agent=True, console=console)

    assert outbox.sent == [{"to": "bob", "body": "hi"}]
    assert printed(console).splitlines() == [
        "You: Assistant: Mailing.",
        '[tool:start] send_email {"to": "bob", "body": "hi"}',
        "[interrupt] Send it?",
        '  tool: send_email {"to": "bob", "body": "hi"}',
        "  decisions: approve, reject",
        "You: Assistant: [tool:end] send_email → sent to bob",
        "Mail sent.",
        "You: ",
    ]


SCRIPT = textwrap.dedent(
    """
    from ai_utils.streaming import session

    class Agent:
        def stream(self, input=None, **kwargs):
            if "decision" in kwargs:
                yield from [{"kind": "tool", "phase": "end", "tool_name": "rm", "id": "1", "output": "ok",
                             "status": "success"}, "Deleted."]
            else:
                yield from ["Really? ", {"kind": "interrupt", "id": "i", "question": "Delete /tmp/x?",
                                         "decisions": ["approve", "reject"], "tool_name": "rm", "args": {}}]

    session(Agent(), id="cli", is_deep_agent=True)
    print("BYE")
    """
)


def test_a_session_reads_piped_stdin_in_a_real_process() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        input="delete it\nja\nexit\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )

    assert done.returncode == 0, done.stderr
    assert "[interrupt] Delete /tmp/x?" in done.stdout
    assert "[tool:end] rm" in done.stdout and "Deleted." in done.stdout
    assert done.stdout.rstrip().endswith("BYE")


def _read_until(fd: int, needle: bytes, seen: bytearray, count: int = 1, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while seen.count(needle) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"{needle!r} not in {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                data = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                data = b""
            assert data, f"terminal closed before {needle!r}: {bytes(seen)!r}"
            seen.extend(data)


def test_a_session_works_on_a_real_terminal() -> None:
    # A pseudo-terminal pair; subprocess (not pty.fork) keeps this safe in a multi-threaded test process.
    fd, child_side = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        stdin=child_side,
        stdout=child_side,
        stderr=child_side,
        env={**os.environ, "COLUMNS": "200", "TERM": "xterm"},
        start_new_session=True,
    )
    os.close(child_side)
    seen = bytearray()
    try:
        _read_until(fd, b"You:", seen)
        os.write(fd, b"delete it\n")
        _read_until(fd, b"decisions: approve, reject", seen)
        _read_until(fd, b"You:", seen, count=2)  # the prompt for the decision
        os.write(fd, b"approve\n")
        _read_until(fd, b"Deleted.", seen)
        _read_until(fd, b"You:", seen, count=3)
        os.write(fd, b"exit\n")
        _read_until(fd, b"BYE", seen)
    finally:
        returncode = child.wait(timeout=30)
        os.close(fd)

    assert returncode == 0
    assert b"[interrupt]" in seen and b"Delete /tmp/x?" in seen
    assert b"\x1b[" in seen  # a terminal gets rich's colours


def test_console_helpers_name_the_extra_when_rich_is_missing() -> None:
    code = "import sys; sys.modules['rich'] = None\nfrom ai_utils.streaming import session"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)

    assert 'pip install "ai-utils[server]"' in done.stderr


def test_stream_response_names_the_extra_when_starlette_is_missing() -> None:
    code = "import sys; sys.modules['starlette'] = None\nfrom ai_utils.streaming import StreamResponse"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)

    assert 'pip install "ai-utils[server]"' in done.stderr and "StreamResponse" in done.stderr


def test_log_chunk_shows_a_long_tool_result_on_one_cut_line() -> None:
    console = plain_console()
    log_chunk({**END, "output": "line one\nline two " + "x" * 500}, console=console)
    (line,) = printed(console).splitlines()
    assert line.startswith("[tool:end] send_email → line one line two xxx") and line.endswith("…")
    assert len(line) < 240
