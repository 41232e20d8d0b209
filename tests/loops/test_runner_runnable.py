"""`LoopRunner` is a LangChain `Runnable`: the thread may come in the config, batch runs per-input configs."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import Runnable
from langchain_core.tools import tool

from ai_utils import LoopResult, LoopRunner, MemorySaver, UserError, ctx, define_loop, permission, tool_step

ALLOW = [permission("all", resource="tool", action="call", effect="allow", match={"tool": "*"})]


@tool
def echo(payload: dict[str, Any]) -> dict[str, Any]:
    """Return the payload."""
    return payload


def runner() -> LoopRunner:
    loop = define_loop(
        "echo",
        start="call",
        steps={"call": tool_step("echo", input={"payload": ctx("request")}, save_as="out", next="end")},
        permissions=ALLOW,
        result={"data": ctx("out")},
    )
    return LoopRunner(loop, tools=[echo], checkpointer=MemorySaver())


def test_the_thread_may_come_in_the_config() -> None:
    loops = runner()

    out = loops.invoke({"request": {"n": 1}}, {"configurable": {"thread_id": "r1"}})

    assert isinstance(loops, Runnable)
    assert isinstance(out, LoopResult) and out.data == {"n": 1}
    assert loops.state("r1") == "completed"
    with pytest.raises(UserError, match="name different threads"):
        loops.invoke({"request": {"n": 2}}, {"configurable": {"thread_id": "r1"}}, thread_id="r2")
    with pytest.raises(UserError, match="needs `thread_id`"):
        loops.invoke({"request": {"n": 3}})


def test_batch_runs_each_input_on_its_own_thread() -> None:
    loops = runner()

    results = loops.batch(
        [{"request": {"n": 1}}, {"request": {"n": 2}}],
        [{"configurable": {"thread_id": "a"}}, {"configurable": {"thread_id": "b"}}],
    )

    assert [r.data for r in results if isinstance(r, LoopResult)] == [{"n": 1}, {"n": 2}]
    assert (loops.state("a"), loops.state("b")) == ("completed", "completed")


async def test_a_sync_run_inside_a_running_loop_warns() -> None:
    loops = runner()

    with pytest.warns(RuntimeWarning, match=r"LoopRunner\.invoke\(\).*ainvoke") as seen:
        loops.invoke({"request": {"n": 1}}, thread_id="w")
    assert len(seen) == 1
    assert isinstance(await loops.ainvoke({"request": {"n": 2}}, thread_id="w2"), LoopResult)
