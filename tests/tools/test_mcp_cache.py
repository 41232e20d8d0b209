"""The per-process cache of MCP tool definitions: a run opens its own session but lists tools only once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import ai_utils.tools._mcp_cache as mcp_cache
from ai_utils.tools.mcp import MCPServer, clear_tool_cache, mcp_scope


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    clear_tool_cache()
    yield
    clear_tool_cache()


def _list_requests(counter_url: str) -> int:
    count: int = httpx.get(counter_url.removesuffix("/mcp") + "/_list_tools", timeout=30).json()
    return count


def _closed(counter_url: str) -> list[str]:
    closed: list[str] = httpx.get(counter_url.removesuffix("/mcp") + "/_closed", timeout=30).json()
    return closed


async def _call(scope: Any, name: str) -> Any:
    tool = next(t for t in scope.tools if t.name == name)
    return await tool.ainvoke({})


def _text(result: Any) -> str:
    return result if isinstance(result, str) else "".join(b["text"] for b in result if b.get("type") == "text")


def _whoami(result: Any) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(_text(result))
    return report


async def test_a_second_run_reuses_the_tool_list_but_opens_and_closes_its_own_session(counter_url: str) -> None:
    before = _list_requests(counter_url)
    server = MCPServer("counter", counter_url)

    async with mcp_scope(server) as first:
        first_session = _whoami(await _call(first, "counter__whoami"))["session_id"]
        assert _text(await _call(first, "counter__increment")) == "1"
    async with mcp_scope(server) as second:
        assert sorted(t.name for t in second.tools) == sorted(t.name for t in first.tools)
        assert "counter__increment" in {t.name for t in second.tools}
        second_session = _whoami(await _call(second, "counter__whoami"))["session_id"]
        # The cached tools are bound to this run's session: its counter starts at 1 again.
        assert [_text(await _call(second, "counter__increment")) for _ in range(2)] == ["1", "2"]

    assert _list_requests(counter_url) - before == 1
    assert first_session != second_session
    assert {first_session, second_session} <= set(_closed(counter_url))


async def test_a_renamed_server_gets_the_cached_tools_under_its_own_prefix(counter_url: str) -> None:
    before = _list_requests(counter_url)
    async with mcp_scope(MCPServer("counter", counter_url)):
        pass
    async with mcp_scope(MCPServer("tally", counter_url)) as scope:
        assert {"tally__increment", "tally__whoami", "tally__fail"} <= {t.name for t in scope.tools}
        assert all(t.metadata and t.metadata["mcp_server"] == "tally" for t in scope.tools)
    assert _list_requests(counter_url) - before == 1


async def test_a_changed_server_config_lists_the_tools_again(counter_url: str) -> None:
    before = _list_requests(counter_url)
    async with mcp_scope(MCPServer("counter", counter_url, headers={"X-Tenant": "a"})):
        pass
    async with mcp_scope(MCPServer("counter", counter_url, headers={"X-Tenant": "b"})) as scope:
        assert _whoami(await _call(scope, "counter__whoami"))["tenant"] == "b"
    assert _list_requests(counter_url) - before == 2


async def test_clearing_the_cache_or_an_expired_entry_lists_the_tools_again(
    counter_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = MCPServer("counter", counter_url)
    before = _list_requests(counter_url)
    async with mcp_scope(server):
        pass
    clear_tool_cache()
    async with mcp_scope(server):
        pass
    assert _list_requests(counter_url) - before == 2

    monkeypatch.setattr(mcp_cache, "TOOL_CACHE_TTL", 0.0)
    async with mcp_scope(server):
        pass
    assert _list_requests(counter_url) - before == 3


async def test_the_cache_keeps_a_bounded_number_of_servers(counter_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_cache, "_TOOL_CACHE_SIZE", 2)
    before = _list_requests(counter_url)
    for tenant in ("a", "b", "c", "a"):
        async with mcp_scope(MCPServer("counter", counter_url, headers={"X-Tenant": tenant})):
            pass
    # "a" was evicted by "c", so its second run lists again; "c" and "a" are what is left.
    assert _list_requests(counter_url) - before == 4
    async with mcp_scope(MCPServer("counter", counter_url, headers={"X-Tenant": "c"})):
        pass
    assert _list_requests(counter_url) - before == 4
