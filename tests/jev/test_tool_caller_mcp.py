"""JevToolCaller with MCP tools over streamable HTTP: prefixed names, per-server params, sessions closed."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from ai_utils.exceptions import UserError
from ai_utils.jev import JevNoParamOptionsError, JevReturn, JevTool, JevToolCaller
from ai_utils.testing.jev_server import FakeJevServer
from ai_utils.tools._mcp_config import MCPServer

SECRET = "sk-SENTINEL-7f3a9c"


class Ctx(BaseModel):
    api_token: str


def make(jev: FakeJevServer, **kwargs: Any) -> JevToolCaller:
    kwargs.setdefault("tools", [])
    return JevToolCaller(api_key=jev.api_key, base_url=jev.url, **kwargs)


def _closed_sessions(counter_url: str) -> list[str]:
    closed: list[str] = httpx.get(counter_url.removesuffix("/mcp") + "/_closed", timeout=5).json()
    return closed


async def test_an_mcp_tool_runs_with_the_picked_candidate_as_its_argument(
    jev: FakeJevServer, everything_url: str
) -> None:
    jev.answer("tool", choice="everything__echo")
    jev.answer("message", choice="hallo")
    server = MCPServer(
        "everything", everything_url, description="A demo server.", params={"echo": {"message": ["hi", "hallo"]}}
    )
    out = await make(jev, mcp_server=server).ainvoke({"request": "Sag hallo"})

    assert isinstance(out, JevReturn)
    assert (out.tool.name, out.value, out.params["message"].value) == ("everything__echo", "Echo: hallo", "hallo")
    assert len(jev.requests) == 2
    criteria = jev.requests[0].body["questions"]["tool"]["criteria"]
    assert criteria["everything__echo"].startswith("A demo server.\n")
    assert all(description.startswith("A demo server.\n") for description in criteria.values())


def test_sync_invoke_with_a_dynamic_per_server_provider_that_gets_the_server_and_context(
    jev: FakeJevServer, everything_url: str
) -> None:
    seen: dict[str, Any] = {}

    async def messages(*, context: Ctx, server: MCPServer, state: dict[str, Any], thread_id: str | None) -> Any:
        seen.update(server=server.name, token=context.api_token, thread=thread_id)
        return {"message": ["only this"]}

    jev.answer("tool", choice="everything__echo")
    server = MCPServer("everything", everything_url, params={"echo": messages})
    out = make(jev, mcp_server=server, context_schema=Ctx).invoke(
        {"request": "echo"}, context={"api_token": SECRET}, thread_id="t9", debug=True
    )
    assert out.value == "Echo: only this"  # type: ignore[union-attr]
    assert seen == {"server": "everything", "token": SECRET, "thread": "t9"}
    assert len(jev.requests) == 1
    assert all(SECRET.encode() not in request.raw for request in jev.requests)
    assert SECRET not in out.model_dump_json()


def test_local_and_mcp_tools_are_offered_together_and_call_tool_runs_an_mcp_tool(
    jev: FakeJevServer, everything_url: str
) -> None:
    server = MCPServer("everything", everything_url, params={"echo": {"message": ["a", "b"]}})
    caller = make(jev, tools=[JevTool("local", "A local tool.", lambda: "local")], mcp_server=server)
    assert caller.invoke({"q": "local"}).value == "local"  # type: ignore[union-attr]
    assert {"local", "everything__echo"} <= set(jev.requests[0].body["questions"]["tool"]["criteria"])

    out = caller.call_tool({"q": "b"}, tool="everything__echo", params={"message": "b"})
    assert (out.value, out.tool.confidence) == ("Echo: b", 1.0)
    with pytest.raises(TypeError, match="not a candidate"):
        caller.call_tool({"q": "c"}, tool="everything__echo", params={"message": "c"})


async def test_the_session_is_closed_after_success_and_after_an_error(jev: FakeJevServer, counter_url: str) -> None:
    jev.answer("tool", choice="counter__increment")
    before = len(_closed_sessions(counter_url))
    caller = make(jev, mcp_server=MCPServer("counter", counter_url, params={"fail": {"message": []}}))
    out = await caller.ainvoke({"q": "count"})
    assert out.value == "1"  # type: ignore[union-attr]
    assert len(_closed_sessions(counter_url)) == before + 1

    jev.answer("tool", choice="counter__fail")
    with pytest.raises(JevNoParamOptionsError):
        await caller.ainvoke({"q": "fail"})
    assert len(_closed_sessions(counter_url)) == before + 2


async def test_interrupt_on_keys_are_checked_against_loaded_mcp_tools(jev: FakeJevServer, everything_url: str) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    caller = make(
        jev,
        mcp_server=MCPServer("everything", everything_url, params={"echo": {"message": ["x"]}}),
        checkpointer=InMemorySaver(),
        interrupt_on={"everything__echoo": "Echo?"},
    )
    jev.answer("tool", choice="everything__echo")
    with pytest.warns(UserWarning, match="everything__echoo"):
        out = await caller.ainvoke({"q": "x"}, thread_id="t")
    assert out.value == "Echo: x"  # type: ignore[union-attr]  # the misspelt key paused nothing


async def test_a_local_tool_named_like_an_mcp_tool_is_rejected(jev: FakeJevServer, everything_url: str) -> None:
    caller = make(
        jev, tools=[JevTool("everything__echo", "Dup.", lambda: 1)], mcp_server=MCPServer("everything", everything_url)
    )
    with pytest.raises(UserError, match="Duplicate tool names"):
        await caller.ainvoke({"q": "x"})


async def test_per_server_params_for_a_tool_the_server_does_not_offer_warn(
    jev: FakeJevServer, everything_url: str
) -> None:
    server = MCPServer("everything", everything_url, params={"ecco": {"message": ["x"]}, "echo": {"message": ["y"]}})
    jev.answer("tool", choice="everything__echo")
    with pytest.warns(UserWarning, match="'everything__ecco' matches no tool"):
        out = await make(jev, mcp_server=server).ainvoke({"q": "x"})
    assert out.value == "Echo: y"  # type: ignore[union-attr]
