"""Two LangGraph API servers on one Postgres serve the same threads: a run started on one is rejoined, refused
(``reject``), queued behind (``enqueue``), interrupted and cancelled from the other, through the SDK."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _langgraph_app import Gate, create_app
from conftest import LiveServer
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError

from ai_utils import postgres_sessions
from ai_utils.sessions import SessionStore


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.fixture
def two_urls(postgres_uri: str, serve: Callable[[Any], LiveServer], gate: Gate) -> Iterator[tuple[str, str]]:
    stores: list[SessionStore] = [postgres_sessions(postgres_uri, lease_seconds=2) for _ in range(2)]
    try:
        yield serve(create_app(stores[0])).base_url, serve(create_app(stores[1])).base_url
    finally:
        gate.event.set()
        for store in stores:
            store.close()  # type: ignore[attr-defined]


def started(gate: Gate, count: int) -> None:
    deadline = time.monotonic() + 30
    while gate.started < count:
        assert time.monotonic() < deadline, "the slow tool never started"
        time.sleep(0.02)


def test_two_servers_on_one_postgres_share_threads_and_multitask_strategies(
    two_urls: tuple[str, str], gate: Gate
) -> None:
    first_url, second_url = two_urls
    with (
        get_sync_client(url=first_url, api_key="alice-key") as first,
        get_sync_client(url=second_url, api_key="alice-key") as second,
        get_sync_client(url=second_url, api_key="bob-key") as bob,
    ):
        tid = first.threads.create(metadata={"topic": "orders"})["thread_id"]
        assert [t["thread_id"] for t in second.threads.search(metadata={"topic": "orders"})] == [tid]
        with pytest.raises(NotFoundError):
            bob.threads.get(tid)

        run = first.runs.create(tid, "support", input=ask("slow K"))
        started(gate, 1)
        seen: list[str] = []
        follower = threading.Thread(
            target=lambda: seen.extend(p.event for p in second.runs.join_stream(tid, run["run_id"]))
        )
        follower.start()
        for _ in range(3):  # refused on the other server, nothing stored; the store stays usable after it
            with pytest.raises(ConflictError):
                second.runs.create(tid, "support", input=ask("where is X"))
        queued = second.runs.create(tid, "support", input=ask("where is Q"), multitask_strategy="enqueue")
        gate.event.set()
        follower.join(30)
        assert seen[0] == "metadata" and seen[-1] == "end"
        assert second.runs.join(tid, queued["run_id"])["messages"][-1]["content"] == "Q is shipped."
        for text in ("where is R", "where is S", "where is T"):
            assert second.runs.wait(tid, "support", input=ask(text))["messages"][-1]["content"].endswith("shipped.")
            assert first.threads.get_state(tid)["values"]["messages"][-1]["content"].endswith("shipped.")
            assert len(first.runs.list(tid, limit=50)) == len(second.runs.list(tid, limit=50))

        gate.reset()
        slow = first.runs.create(tid, "support", input=ask("slow L"))
        started(gate, 1)
        done = second.runs.wait(tid, "support", input=ask("where is I"), multitask_strategy="interrupt")
        assert done["messages"][-1]["content"] == "I is shipped."
        assert first.runs.get(tid, slow["run_id"])["status"] == "interrupted"

        gate.reset()
        slow = first.runs.create(tid, "support", input=ask("slow C"))
        started(gate, 1)
        second.runs.cancel(tid, slow["run_id"], wait=True)
        assert first.runs.get(tid, slow["run_id"])["status"] == "interrupted"
        assert second.threads.get(tid)["status"] == "idle"
        gate.event.set()
