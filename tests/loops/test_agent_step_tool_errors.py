"""A loop's agent step runs the same tool loop as `Agent` (SPEC §19): a raising tool reaches the step's model."""

from __future__ import annotations

from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from ai_utils import LoopRunner, agent_step, define_loop, permission
from ai_utils.client import is_tool_event
from ai_utils.testing import FakeChatModel

ALLOW = [permission("all", resource="tool", action="call", effect="allow", match={"tool": "*"})]
KEY = "AKIA" + "ABCDEFGH12345678"


@tool
def fetch(order_id: str) -> str:
    """Fetch an order."""
    raise TimeoutError(f"orders service timed out for {order_id} (key {KEY})")


def _runner(llm: FakeChatModel) -> LoopRunner:
    loop = define_loop(
        "orders", start="answer", steps={"answer": agent_step(tools=["fetch"], next="end")}, permissions=ALLOW
    )
    return LoopRunner(loop, llm=llm, tools=[fetch])


def test_a_raising_tool_in_an_agent_step_reaches_the_model_and_the_loop_completes() -> None:
    llm = FakeChatModel(
        [{"tool_calls": [{"name": "fetch", "args": {"order_id": "O-9"}}]}, "The order service is slow."]
    )
    result = _runner(llm).invoke({"request": {}}, thread_id="t")
    assert result.context["answer"] == {"text": "The order service is slow."}
    (failed,) = [m for m in llm.calls[1] if isinstance(m, ToolMessage)]
    assert failed.status == "error" and failed.text.startswith("TimeoutError: orders service timed out for O-9")
    assert KEY not in failed.text and "[REDACTED:aws_access_key]" in failed.text


async def test_the_loop_stream_ends_the_failed_call_with_status_error() -> None:
    llm = FakeChatModel([{"tool_calls": [{"name": "fetch", "args": {"order_id": "O-9"}}]}, "Slow."])
    chunks = [c async for c in _runner(llm).astream({"request": {}}, thread_id="t", show_tool_calls=True)]
    ends = [c for c in chunks if is_tool_event(c) and c["phase"] == "end"]
    assert [e["status"] for e in ends] == ["error"] and KEY not in str(chunks)
