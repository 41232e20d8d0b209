from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_tests.unit_tests import ToolsUnitTests

from ai_utils.exceptions import UserError
from ai_utils.tools.tavily import TavilySearch, tavily_search_tool

ANSWER = {
    "query": "wetter berlin",
    "answer": "Sonnig, 21 Grad.",
    "results": [
        {
            "title": "Wetter Berlin",
            "url": "https://wetter.example/berlin",
            "content": "Sonne",
            "score": 0.9,
            "raw_content": None,
        },
        {"title": "DWD", "url": "https://dwd.example", "content": "Heiter", "score": 0.5, "raw_content": None},
    ],
    "response_time": 0.1,
}


class TavilyStub:
    """A real HTTP server on 127.0.0.1 that answers ``POST /search`` like Tavily and records each request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.body: Any = ANSWER
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                stub.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "json": json.loads(self.rfile.read(length))}
                )
                payload = json.dumps(stub.body).encode()
                self.send_response(stub.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def _tavily_server() -> Iterator[TavilyStub]:
    stub = TavilyStub()
    thread = threading.Thread(target=stub.server.serve_forever, daemon=True)
    thread.start()
    yield stub
    stub.server.shutdown()
    stub.server.server_close()
    thread.join()


@pytest.fixture
def tavily(_tavily_server: TavilyStub) -> TavilyStub:
    _tavily_server.requests.clear()
    _tavily_server.status, _tavily_server.body = 200, ANSWER
    return _tavily_server


def test_sync_search_sends_query_options_and_bearer_key(tavily: TavilyStub) -> None:
    tool = TavilySearch(api_key="tvly-test", max_results=2, topic="news", api_base_url=tavily.url)
    result = tool.invoke({"query": "wetter berlin"})
    assert result == {
        "query": "wetter berlin",
        "results": [
            {"title": "Wetter Berlin", "url": "https://wetter.example/berlin", "content": "Sonne"},
            {"title": "DWD", "url": "https://dwd.example", "content": "Heiter"},
        ],
    }
    [request] = tavily.requests
    assert request["path"] == "/search"
    assert request["headers"]["Authorization"] == "Bearer tvly-test"
    assert request["json"] == {"query": "wetter berlin", "max_results": 2, "topic": "news", "include_answer": False}


async def test_async_search_keeps_the_answer_when_asked_for(tavily: TavilyStub) -> None:
    tool = tavily_search_tool(api_key="tvly-async", include_answer=True, api_base_url=tavily.url)
    result = await tool.ainvoke({"query": "wetter berlin"})
    assert result["answer"] == "Sonnig, 21 Grad."
    assert [item["url"] for item in result["results"]] == ["https://wetter.example/berlin", "https://dwd.example"]
    [request] = tavily.requests
    assert request["headers"]["Authorization"] == "Bearer tvly-async"
    assert request["json"] == {"query": "wetter berlin", "max_results": 5, "topic": "general", "include_answer": True}


def test_key_comes_from_the_environment(tavily: TavilyStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-env")
    tavily_search_tool(api_base_url=tavily.url).invoke({"query": "x"})
    assert tavily.requests[0]["headers"]["Authorization"] == "Bearer tvly-env"


def test_missing_key_is_a_user_error_naming_the_variable() -> None:
    with pytest.raises(UserError, match="TAVILY_API_KEY"):
        TavilySearch()
    with pytest.raises(UserError, match="TAVILY_API_KEY"):
        tavily_search_tool(api_key="")


def test_key_never_shows_in_repr() -> None:
    assert "tvly-secret" not in repr(TavilySearch(api_key="tvly-secret"))


def test_tool_call_becomes_a_json_tool_message(tavily: TavilyStub) -> None:
    tool = TavilySearch(api_key="tvly-test", api_base_url=tavily.url)
    message = tool.invoke({"type": "tool_call", "id": "t1", "name": "tavily_search", "args": {"query": "x"}})
    assert isinstance(message, ToolMessage)
    assert message.status == "success"
    assert json.loads(str(message.content))["results"][0]["title"] == "Wetter Berlin"


@pytest.mark.parametrize(
    ("status", "expected"),
    [(401, "InvalidAPIKeyError.*TAVILY_API_KEY"), (429, "usage limit"), (500, "HTTPError.*500")],
)
def test_http_error_comes_back_as_an_error_tool_message(tavily: TavilyStub, status: int, expected: str) -> None:
    tavily.status, tavily.body = status, {"detail": {"error": "nope"}}
    tool = TavilySearch(api_key="tvly-test", api_base_url=tavily.url)
    message = tool.invoke({"type": "tool_call", "id": "t1", "name": "tavily_search", "args": {"query": "x"}})
    assert isinstance(message, ToolMessage)
    assert message.status == "error"
    assert message.content.startswith("Tavily search failed")
    assert re.search(expected, str(message.content))
    assert "tvly-test" not in str(message.content)


async def test_async_http_error_comes_back_as_an_error_tool_message(tavily: TavilyStub) -> None:
    tavily.status, tavily.body = 503, {"detail": {"error": "down"}}
    tool = TavilySearch(api_key="tvly-test", api_base_url=tavily.url)
    message = await tool.ainvoke({"type": "tool_call", "id": "t1", "name": "tavily_search", "args": {"query": "x"}})
    assert isinstance(message, ToolMessage)
    assert message.status == "error"
    assert "503" in str(message.content)


class TestTavilySearchStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> type[TavilySearch]:
        return TavilySearch

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"api_key": "tvly-test"}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"query": "Wie wird das Wetter in Berlin?"}

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        return {"TAVILY_API_KEY": "tvly-env"}, {}, {"api_key": "tvly-env"}


def test_module_without_tavily_installed_names_the_extra() -> None:
    script = """
import sys
sys.modules["tavily"] = None  # as if the `tavily` extra were not installed
try:
    import ai_utils.tools.tavily
except ImportError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == (
        'Please install `tavily-python` to use the Tavily search tool: `pip install "ai-utils[tavily]"`'
    )
