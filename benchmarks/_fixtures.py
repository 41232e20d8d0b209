"""Shared pieces of the agent benchmarks: a zero-latency model that calls a tool on demand, and thread copies.

The model answers from the last message: a human message starting with ``"calc"`` gets one ``add`` tool
call, a tool result gets a short answer, anything else gets ``reply`` (streamed word by word, with
``await asyncio.sleep(0)`` between chunks as a network-bound model would).
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from _harness import Metric
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils.testing import FunctionChatModel

TESTS = Path(__file__).resolve().parent.parent / "tests"
REPLY = "Sure, here is the answer you asked for."
TOOL_PROMPT = "calc 2 + 3"
PLAIN_PROMPT = "hello"
SHORT_PROMPT = "short"
SHORT_REPLY = " ".join(f"word{i}" for i in range(20))
REPORT_ROUNDS = 15


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def scripted_model(reply: str = REPLY) -> FunctionChatModel:
    """A fresh zero-latency model: one ``add`` call for ``calc ...`` prompts, 20 words for ``short``, else ``reply``."""

    def answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return f"The result is {last.text}."
        if isinstance(last, HumanMessage) and last.text.startswith("calc"):
            return {"tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]}
        if isinstance(last, HumanMessage) and last.text == SHORT_PROMPT:
            return SHORT_REPLY
        return reply

    return FunctionChatModel(answer)


def forget_calls(model: FunctionChatModel) -> None:
    """Drop the model's call log (it keeps every call's messages alive, which skews gc and memory)."""
    model._calls.clear()


def history(n: int, *, text: str = "some earlier message about the project") -> list[BaseMessage]:
    """``n`` alternating human/AI messages (an already-long conversation)."""
    return [HumanMessage(f"{text} {i}") if i % 2 == 0 else AIMessage(f"{text} {i}") for i in range(n)]


def snapshot(saver: InMemorySaver) -> tuple[dict[Any, Any], dict[Any, Any], dict[Any, Any]]:
    """A copy of everything an `InMemorySaver` holds (values are immutable bytes tuples)."""
    storage = {t: {ns: dict(cps) for ns, cps in by_ns.items()} for t, by_ns in saver.storage.items()}
    writes = {k: dict(v) for k, v in saver.writes.items()}
    return storage, writes, dict(saver.blobs)


def restore(saver: InMemorySaver, state: tuple[dict[Any, Any], dict[Any, Any], dict[Any, Any]]) -> None:
    """Put ``saver`` back to ``state`` (a `snapshot`), so every sample starts from the same thread."""
    storage, writes, blobs = state
    saver.storage.clear()
    for thread_id, by_ns in storage.items():
        for ns, cps in by_ns.items():
            saver.storage[thread_id][ns] = dict(cps)
    saver.writes.clear()
    saver.writes.update({k: dict(v) for k, v in writes.items()})
    saver.blobs.clear()
    saver.blobs.update(blobs)


def stored_bytes(saver: InMemorySaver) -> int:
    """Bytes an `InMemorySaver` holds: serialized checkpoints, metadata, channel blobs and pending writes."""
    total = 0
    for by_ns in saver.storage.values():
        for cps in by_ns.values():
            for checkpoint, metadata, _parent in cps.values():
                total += len(checkpoint[1]) + len(metadata[1])
    for _type, blob in saver.blobs.values():
        total += len(blob)
    for by_task in saver.writes.values():
        for _task, _channel, value, _path in by_task.values():
            total += len(value[1])
    return total


LONG_REPLY = " ".join(f"word{i}" for i in range(200))
"""A 200-chunk answer: the fake model streams it word by word."""

_services = contextlib.ExitStack()
atexit.register(_services.close)


def start_service(
    cmd: Sequence[str], *, ready_url: str, env: Mapping[str, str] | None = None, timeout: float = 60.0
) -> None:
    """Start a server process (tests/_services.running) that lives until the benchmark process exits."""
    sys.path.insert(0, str(TESTS))
    from _services import running

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        # A terminated benchmark run still stops its servers (atexit does not run on a bare SIGTERM).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    _services.enter_context(running(cmd, ready_url=ready_url, env=env, timeout=timeout))


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ThreadStack:
    """One agent stack on its own `InMemorySaver`, its thread pre-filled (lazily) to ``history`` messages.

    A subclass sets ``run(prompt)`` (one turn on the thread). `reset` (untimed, before each sample) puts the
    saver back to the pre-filled thread, so a thread of H messages stays H messages for every sample.
    """

    def __init__(self, history: int) -> None:
        self.history = history
        self.saver = InMemorySaver()
        self.model = scripted_model()
        self._state: Any = None
        self.run: Callable[[str], Awaitable[Any]]

    async def reset(self) -> None:
        """Untimed: back to the pre-filled thread (built on first use, one turn = 2 messages)."""
        if self._state is None:
            for _ in range(self.history // 2):
                await self.run(PLAIN_PROMPT)
            self._state = snapshot(self.saver)
        restore(self.saver, self._state)
        forget_calls(self.model)

    def turn(self, prompt: str) -> Callable[[], Awaitable[Any]]:
        """A timed sample: one turn with ``prompt``."""

        async def sample() -> None:
            await self.run(prompt)

        return sample


def turn_metric(
    name: str, ours: ThreadStack, anchor: ThreadStack, prompt: str, target: float | None, note: str
) -> Metric:
    """``ours`` vs ``anchor`` for one turn from their pre-filled threads (report rows get fewer rounds)."""
    return Metric(
        name,
        ours.turn(prompt),
        anchor.turn(prompt),
        target,
        note=note,
        ours_setup=ours.reset,
        anchor_setup=anchor.reset,
        # Report-only rows get fewer rounds: the untimed full gc.collect() per sample dominates the budget.
        rounds=None if target is not None else REPORT_ROUNDS,
    )
