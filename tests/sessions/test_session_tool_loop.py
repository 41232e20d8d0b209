"""SPEC §19 in durable turns: a raising tool does not end the turn; tools that are not idempotent run alone."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool

from ai_utils import Agent, durable_tool, sqlite_sessions
from ai_utils.client import is_tool_event
from ai_utils.testing import FakeChatModel

SENTINEL = "sess-sentinel-51c2"
KEY = "ghp_" + "A1b2C3d4" * 5


@dataclass
class Account:
    token: str


def test_a_raising_tool_in_a_durable_turn_reaches_the_model_and_the_turn_goes_on(tmp_path: Path) -> None:
    def charge(order_id: str, runtime: ToolRuntime[Account]) -> str:
        """Charge an order."""
        raise ConnectionError(f"payments unreachable for {order_id} with {runtime.context.token} and {KEY}")

    llm = FakeChatModel(
        [{"tool_calls": [{"name": "charge", "args": {"order_id": "A-1"}}]}, "Payments are down.", "Still down."]
    )
    store = sqlite_sessions(tmp_path / "s.sqlite")
    try:
        agent = Agent(
            llm=llm, tools=[durable_tool(charge, idempotent=True)], sessions=store, context_schema=Account, name="shop"
        )
        s = agent.session(context=Account(token=SENTINEL))
        result = s.prompt("Charge A-1").result(timeout=120)
        assert (result.stop_reason, result.output, result.error) == ("end_turn", "Payments are down.", None)
        (failed,) = [m for m in llm.calls[1] if isinstance(m, ToolMessage)]
        assert failed.status == "error" and failed.text.startswith("ConnectionError: payments unreachable for A-1")
        assert SENTINEL not in failed.text and KEY not in failed.text and "[REDACTED:github_token]" in failed.text
        # The stored log (what a reconnecting client replays) ends the call with status "error".
        ends = [
            line["chunk"] for line in s.stream(0) if is_tool_event(line["chunk"]) and line["chunk"]["phase"] == "end"
        ]
        assert [e["status"] for e in ends] == ["error"] and SENTINEL not in str(ends)
        assert s.prompt("And now?").result(timeout=120).output == "Still down."  # the session goes on
    finally:
        store.close()  # type: ignore[attr-defined]
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert SENTINEL.encode() not in stored and KEY.encode() not in stored


def test_in_a_durable_turn_a_tool_that_is_not_idempotent_runs_alone(tmp_path: Path) -> None:
    spans: dict[str, tuple[float, float]] = {}
    barrier = threading.Barrier(2, timeout=60)

    def look(key: str) -> str:
        """Look something up."""
        start = time.perf_counter()
        barrier.wait()  # both lookups run at once, or this times out
        spans[key] = (start, time.perf_counter())
        return key

    def change(key: str) -> str:
        """Change something."""
        spans[key] = (time.perf_counter(), time.perf_counter())
        return key

    # Declared the way a `BaseTool` from elsewhere would be: `idempotent` only; with sessions `writes` follows it.
    changer = StructuredTool.from_function(change)
    changer.metadata = {"idempotent": False}
    calls = [{"name": n, "args": {"key": k}} for n, k in (("look", "a"), ("look", "b"), ("change", "c"))]
    llm = FakeChatModel([{"tool_calls": calls}, "done"])
    store = sqlite_sessions(tmp_path / "s.sqlite")
    try:
        agent = Agent(llm=llm, tools=[durable_tool(look, idempotent=True), changer], sessions=store)
        assert agent.session().prompt("go").result(timeout=120).output == "done"
    finally:
        store.close()  # type: ignore[attr-defined]
    assert [m.status for m in llm.calls[1] if isinstance(m, ToolMessage)] == ["success"] * 3
    assert spans["a"][1] <= spans["c"][0] and spans["b"][1] <= spans["c"][0]
