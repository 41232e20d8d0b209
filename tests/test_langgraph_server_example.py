"""examples/langgraph_server.py on uvicorn, driven by the Python ``langgraph-sdk``: the README's support agent answers
a streamed question, a refund waits for approval and ``command={"resume": ...}`` answers it; threads stay with
their user and a request without a key is refused."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import LiveServer
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

EXAMPLE = Path(__file__).parents[1] / "examples" / "langgraph_server.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("langgraph_server_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_serves_the_support_agent_to_the_langgraph_sdk(
    serve: Callable[[Any], LiveServer], tmp_path: Path
) -> None:
    app = load_example().create_app(tmp_path / "support.sqlite", api_keys="k-anna=anna,k-ben=ben")
    url = serve(app).base_url
    try:
        with (
            get_sync_client(url=url, api_key="k-anna") as anna,
            get_sync_client(url=url, api_key="k-ben") as ben,
        ):
            assert [a["assistant_id"] for a in anna.assistants.search()] == ["support"]
            tid = anna.threads.create()["thread_id"]
            ask = {"messages": [{"role": "user", "content": "Where is B-42?"}]}
            parts = list(anna.runs.stream(tid, "support", input=ask, stream_mode="messages-tuple"))
            tokens = [
                p.data[0]["content"] for p in parts if p.event == "messages" and p.data[0]["type"] == "AIMessageChunk"
            ]
            assert "".join(tokens) == "Let me check. Done: order B-42: shipped."

            waiting = anna.runs.wait(tid, "support", input={"messages": [{"role": "user", "content": "refund B-42"}]})
            assert waiting["__interrupt__"][0]["value"]["action_requests"][0]["args"] == {"order_id": "B-42"}
            done = anna.runs.wait(tid, "support", command={"resume": {"decisions": [{"type": "approve"}]}})
            assert done["messages"][-1]["content"].startswith("Done: refunded B-42 (idempotency key ")

            with pytest.raises(NotFoundError):
                ben.threads.get(tid)
            assert httpx.post(f"{url}/assistants/search", json={}).status_code == 401
    finally:
        app.state.store.close()
