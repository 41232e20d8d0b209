"""Bad requests to the LangGraph API get a real status and the JSON error object (plus the API's ``code``), over
uvicorn: unknown assistants, threads and runs are 404s, malformed bodies 400s, ids and ``Last-Event-ID`` are
validated whole, unserved endpoints are a 404 naming the served ones, and no credentials (or no
``authenticate=``) is a 401. The SDK raises its own typed errors for them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _langgraph_app import support_agent
from conftest import LiveServer
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import BadRequestError, NotFoundError
from starlette.applications import Starlette

from ai_utils import Agent, UserError, langgraph_api_routes, sqlite_sessions
from ai_utils.sessions import SessionStore
from ai_utils.testing import FunctionChatModel

MARKER = "MARKER-77c1"  # put into bad requests: it must never come back
ALICE = {"x-api-key": "alice-key"}
JSON = {"content-type": "application/json", **ALICE}
RUN = {"assistant_id": "support", "input": {"messages": [{"role": "user", "content": "where is B-42"}]}}


@pytest.fixture
def http(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=60) as client:
        yield client


@pytest.fixture
def thread_id(http: httpx.Client) -> str:
    return str(http.post("/threads", json={}, headers=ALICE).json()["thread_id"])


def refused(response: httpx.Response, status: int, says: str = "") -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["kind"] == "error" and isinstance(body["type"], str) and isinstance(body["code"], str)
    assert says in body["message"], body["message"]
    assert MARKER not in response.text
    return dict(body)


def test_unknown_assistants_threads_and_runs_are_json_404s(http: httpx.Client, thread_id: str) -> None:
    refused(http.get("/assistants/nobody", headers=ALICE), 404, "POST /assistants/search")
    refused(http.get("/threads/no-such-thread", headers=ALICE), 404, "POST /threads")
    refused(http.get("/threads/no-such-thread/state", headers=ALICE), 404)
    refused(http.post("/threads/no-such-thread/runs/wait", json=RUN, headers=ALICE), 404)
    refused(http.post(f"/threads/{thread_id}/runs/stream", json={**RUN, "assistant_id": "nobody"}, headers=ALICE), 404)
    for suffix in ("", "/join", "/stream"):
        body = refused(http.get(f"/threads/{thread_id}/runs/no-such-run{suffix}", headers=ALICE), 404)
        assert body["code"] == "not_found" and body["type"] == "NotFound"
    refused(http.post(f"/threads/{thread_id}/runs/no-such-run/cancel", headers=ALICE), 404)


def run_with(**fields: Any) -> bytes:
    return json.dumps({**RUN, **fields}).encode()


@pytest.mark.parametrize(
    ("name", "content", "headers", "status", "says"),
    [
        ("not JSON", f'{{"input": "{MARKER}"'.encode(), JSON, 400, "not valid JSON"),
        ("a JSON list", f'["{MARKER}"]'.encode(), JSON, 400, "JSON object"),
        ("no content type", b"{}", ALICE, 415, "application/json"),
        ("an unknown field", f'{{"assistant_id": "support", "{MARKER}": 1}}'.encode(), JSON, 400, "Unknown field"),
        ("neither input nor command", b'{"assistant_id": "support"}', JSON, 400, "`input`"),
        ("a stream mode of a wrong type", run_with(stream_mode=5), JSON, 400, "`stream_mode`"),
        ("an unserved stream mode", run_with(stream_mode="debug"), JSON, 400, "'debug'"),
        ("a webhook", run_with(webhook="http://x"), JSON, 400, "webhook"),
        ("a goto command", b'{"assistant_id": "support", "command": {"goto": "tools"}}', JSON, 400, "`resume`"),
        ("a strategy of no kind", run_with(multitask_strategy="x"), JSON, 400, "`multitask_strategy`"),
        ("an assistant id with a newline", run_with(assistant_id="support\n"), JSON, 400, "`assistant_id`"),
    ],
)
def test_malformed_run_bodies_are_json_400s(
    http: httpx.Client, thread_id: str, name: str, content: bytes, headers: dict[str, str], status: int, says: str
) -> None:
    refused(http.post(f"/threads/{thread_id}/runs/stream", content=content, headers=headers), status, says)


def test_a_resume_without_a_waiting_interrupt_is_a_400(http: httpx.Client, thread_id: str) -> None:
    http.post(f"/threads/{thread_id}/runs/wait", json=RUN, headers=ALICE)
    body = {"assistant_id": "support", "command": {"resume": "approve"}}
    refused(http.post(f"/threads/{thread_id}/runs/wait", json=body, headers=ALICE), 400, "no interrupt waiting")


def test_ids_and_last_event_id_are_validated_whole(http: httpx.Client, thread_id: str) -> None:
    refused(http.get(f"/threads/{thread_id}%0A", headers=ALICE), 400, "`thread_id`")
    refused(http.post("/threads", json={"thread_id": "t-1\n"}, headers=ALICE), 400, "`thread_id`")
    refused(http.post("/threads", json={"thread_id": "x" * 129}, headers=ALICE), 400, "`thread_id`")
    run_id = http.post(f"/threads/{thread_id}/runs", json=RUN, headers=ALICE).json()["run_id"]
    http.get(f"/threads/{thread_id}/runs/{run_id}/join", headers=ALICE)
    refused(http.get(f"/threads/{thread_id}/runs/{run_id}%0A/join", headers=ALICE), 400, "`run_id`")
    for limit in ("%C2%B2", "1" * 5000, "-1", "1001"):  # "²" is a digit to Python, not a number
        refused(http.get(f"/threads/{thread_id}/runs?limit={limit}", headers=ALICE), 400, "`limit`")
    for bad in ("-2", "-01", "- 1", "1.5", "9223372036854775808", MARKER):
        stream = http.get(f"/threads/{thread_id}/runs/{run_id}/stream", headers={**ALICE, "last-event-id": bad})
        refused(stream, 400, "`Last-Event-ID`")
    past_the_end = http.get(
        f"/threads/{thread_id}/runs/{run_id}/stream", headers={**ALICE, "last-event-id": "9223372036854775807"}
    )
    assert past_the_end.status_code == 200 and past_the_end.text.strip() == "event: end\ndata: null"  # replays nothing
    # "-1" is the LangGraph protocol's "from the start" (the JS SDK's useStream sends it to join a run).
    from_start = http.get(f"/threads/{thread_id}/runs/{run_id}/stream", headers={**ALICE, "last-event-id": "-1"})
    no_header = http.get(f"/threads/{thread_id}/runs/{run_id}/stream", headers=ALICE)
    assert from_start.status_code == 200 and from_start.text == no_header.text and "event: values" in from_start.text


def test_unserved_endpoints_are_json_404s_naming_the_served_ones(http: httpx.Client, thread_id: str) -> None:
    for method, path in (
        ("POST", "/crons"),
        ("POST", f"/threads/{thread_id}/copy"),
        ("GET", f"/store/items?key={MARKER}"),
        ("DELETE", f"/threads/{thread_id}/{MARKER}"),
        ("POST", "/assistants"),
    ):
        body = refused(
            http.request(method, path, headers=JSON, content=b"{}"), 404, "POST /threads/{thread_id}/runs/stream"
        )
        assert "GET /threads/{thread_id}/runs/{run_id}/join" in body["message"]


def test_a_served_path_with_another_method_is_an_unserved_endpoint_404(http: httpx.Client, thread_id: str) -> None:
    body = refused(http.get(f"/threads/{thread_id}/runs/stream", headers=ALICE), 404, "POST /threads/{thread_id}")
    assert body["code"] == "not_found"


def test_the_sdks_unserved_methods_raise_not_found(url: str) -> None:
    """SDK methods whose endpoint shares a served path (``DELETE /threads/{id}``, ``POST /threads/count``...)."""
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, "support", input=RUN["input"])
        (run,) = client.runs.list(tid)
        unserved: list[Callable[[], Any]] = [
            lambda: client.threads.delete(tid),
            lambda: client.threads.update_state(tid, {"messages": []}),
            lambda: client.threads.count(),
            lambda: client.threads.prune([tid]),
            lambda: client.runs.delete(tid, run["run_id"]),
            lambda: client.assistants.update("support", metadata={"a": 1}),
            lambda: client.assistants.delete("support"),
            lambda: client.assistants.count(),
        ]
        for call in unserved:
            with pytest.raises(NotFoundError, match="not served"):
                call()
        assert client.threads.get(tid)["status"] == "idle"  # nothing was deleted or changed


def test_a_malformed_history_cursor_is_a_400(http: httpx.Client, thread_id: str) -> None:
    for before in ({"configurable": 5}, {"configurable": [MARKER]}, [MARKER], {"checkpoint_id": 5}):
        refused(http.post(f"/threads/{thread_id}/history", json={"before": before}, headers=ALICE), 400, "`before`")


def test_thread_search_ids_are_validated_whole(http: httpx.Client, thread_id: str) -> None:
    refused(http.post("/threads/search", json={"ids": [thread_id + "\n"]}, headers=ALICE), 400, "`ids`")
    refused(http.post("/threads/search", json={"ids": [5]}, headers=ALICE), 400, "`ids`")
    found = http.post("/threads/search", json={"ids": [thread_id]}, headers=ALICE).json()
    assert [t["thread_id"] for t in found] == [thread_id]


def test_no_credentials_is_a_json_401_before_anything(http: httpx.Client, thread_id: str) -> None:
    for method, path in (("POST", "/assistants/search"), ("GET", f"/threads/{thread_id}"), ("POST", "/crons")):
        refused(http.request(method, path, headers={"x-api-key": MARKER}), 401, "credentials")


def test_without_authenticate_every_request_is_a_401(
    serve: Callable[[Any], LiveServer], lg_store: SessionStore
) -> None:
    app = Starlette(routes=langgraph_api_routes({"support": support_agent(lg_store)}, sessions=lg_store))
    with get_sync_client(url=serve(app).base_url, api_key="alice-key") as client:
        with pytest.raises(httpx.HTTPStatusError) as denied:
            client.assistants.search()
        assert denied.value.response.status_code == 401 and "authenticate=" in denied.value.response.json()["message"]


def test_the_sdk_raises_its_typed_errors(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        with pytest.raises(NotFoundError, match="no thread"):
            client.threads.get("missing-thread")
        tid = client.threads.create()["thread_id"]
        with pytest.raises(BadRequestError, match="time travel"):
            client.runs.create(tid, "support", input=RUN["input"], checkpoint_id="abc")


def test_bad_options_are_user_errors(tmp_path: Path, lg_store: SessionStore) -> None:
    other = sqlite_sessions(tmp_path / "other.sqlite")
    try:
        stray = Agent(llm=FunctionChatModel(lambda messages, tools: "hi"), sessions=other, name="stray")
        with pytest.raises(UserError, match="sessions=<this store>"):
            langgraph_api_routes({"support": stray}, sessions=lg_store)
    finally:
        other.close()  # type: ignore[attr-defined]
    with pytest.raises(UserError, match="session store"):
        langgraph_api_routes({"support": support_agent(lg_store)}, sessions="threads.sqlite")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="mapping of assistant id"):
        langgraph_api_routes({}, sessions=lg_store)
    with pytest.raises(UserError, match="assistant id 'a b'"):
        langgraph_api_routes({"a b": support_agent(lg_store)}, sessions=lg_store)


def test_a_run_may_name_the_threads_current_checkpoint_never_an_earlier_one(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, "support", input=RUN["input"])
        head = client.threads.get_state(tid)["checkpoint"]
        earlier = client.threads.get_history(tid, limit=3)[-1]["checkpoint"]
        with pytest.raises(BadRequestError, match="time travel"):
            client.runs.create(tid, "support", input=RUN["input"], checkpoint=earlier)
        done = client.runs.wait(tid, "support", input=RUN["input"], checkpoint=head)  # what useStream sends
        assert done["messages"][-1]["content"] == "B-42 is shipped." and len(done["messages"]) == 8
