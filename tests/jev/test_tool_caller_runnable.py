"""`JevToolCaller` is a LangChain `Runnable`: batch, with_config, a thread in the config, the sync-in-loop warning."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import Runnable
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils import UserError
from ai_utils.jev import JevReturn, JevTool
from ai_utils.jev.tool_caller import JevToolCaller
from ai_utils.testing.jev_server import FakeJevServer


def status(**_: Any) -> str:
    return "up"


def make(jev: FakeJevServer, **kwargs: Any) -> JevToolCaller:
    return JevToolCaller(
        tools=[JevTool("status", "System status.", status)], api_key=jev.api_key, base_url=jev.url, **kwargs
    )


def test_batch_runs_each_request(jev: FakeJevServer) -> None:
    caller = make(jev)

    results = caller.batch([{"question": "up?"}, {"question": "still up?"}])

    assert isinstance(caller, Runnable)
    assert [(r.kind, r.value) for r in results if isinstance(r, JevReturn)] == [("return", "up"), ("return", "up")]


def test_the_config_names_the_thread_and_carries_callbacks(jev: FakeJevServer) -> None:
    class Chains(BaseCallbackHandler):
        def __init__(self) -> None:
            self.names: list[str] = []

        def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
            self.names.append(str(kwargs.get("name")))

    handler = Chains()
    caller = make(jev, checkpointer=InMemorySaver())

    out = caller.with_config(callbacks=[handler]).invoke({"question": "up?"}, {"configurable": {"thread_id": "t1"}})

    assert isinstance(out, JevReturn)
    assert "select_tool" in handler.names
    assert caller.graph.get_state({"configurable": {"thread_id": "t1"}}).values["message_history"]
    with pytest.raises(UserError, match="name different threads"):
        caller.invoke({"question": "up?"}, {"configurable": {"thread_id": "t1"}}, thread_id="t2")


async def test_a_sync_call_inside_a_running_loop_warns(jev: FakeJevServer) -> None:
    caller = make(jev)

    with pytest.warns(RuntimeWarning, match=r"JevToolCaller\.invoke\(\).*ainvoke") as seen:
        caller.invoke({"question": "up?"})
    assert len(seen) == 1
    assert isinstance(await caller.ainvoke({"question": "up?"}), JevReturn)


async def test_a_sync_stream_inside_a_running_loop_warns_once_naming_astream(jev: FakeJevServer) -> None:
    caller = make(jev)

    with pytest.warns(RuntimeWarning, match=r"JevToolCaller\.stream\(\).*await JevToolCaller\.astream") as seen:
        answers = list(caller.stream({"question": "up?"}))
    assert len(seen) == 1
    assert seen[0].filename == __file__  # points at the caller's line
    assert [a.value for a in answers if isinstance(a, JevReturn)] == ["up"]
    assert [a async for a in caller.astream({"question": "up?"})][0].kind == "return"
