"""The Python ``langgraph-sdk`` (``get_client`` and ``get_sync_client``) against `langgraph_api_routes` on uvicorn:
assistants, threads, every stream mode with a tool call, an approval resumed with ``command={"resume": ...}``,
``runs.wait``, a background run and ``join``, ``cancel``, double texting, and a stream cut and rejoined."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from _langgraph_app import Gate
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.errors import ConflictError
from langgraph_sdk.schema import StreamPart

USER = {"messages": [{"role": "user", "content": "where is B-42"}]}
ALL_MODES = ["values", "updates", "messages-tuple", "custom"]


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def ids_of(parts: list[StreamPart]) -> list[int]:
    """The SSE ids the parts carried (a frame without an id repeats the last one)."""
    seen: list[int] = []
    for part in parts:
        if part.id is not None and (not seen or int(part.id) != seen[-1]):
            seen.append(int(part.id))
    return seen


def text_of(message: dict[str, Any]) -> str:
    return message["content"] if isinstance(message["content"], str) else ""


# --- the whole flow with both clients --------------------------------------------------------------------------


async def test_the_async_client_searches_creates_streams_resumes_waits_and_joins(url: str) -> None:
    client = get_client(url=url, api_key="alice-key")
    try:
        assistants = await client.assistants.search()
        assert [a["assistant_id"] for a in assistants] == ["support"]
        assert (await client.assistants.get("support"))["graph_id"] == "support"
        thread = await client.threads.create(metadata={"topic": "orders"})
        tid = thread["thread_id"]
        assert thread["status"] == "idle" and thread["metadata"]["owner"] == "alice"

        parts = [p async for p in client.runs.stream(tid, "support", input=USER)]
        assert parts[0].event == "metadata" and parts[-1].event == "end"
        assert parts[-2].event == "values"
        assert text_of(parts[-2].data["messages"][-1]) == "B-42 is shipped."

        waiting = [p async for p in client.runs.stream(tid, "support", input=ask("refund B-42"), stream_mode="updates")]
        (interrupt,) = [p.data["__interrupt__"] for p in waiting if p.event == "updates" and "__interrupt__" in p.data]
        request = interrupt[0]["value"]
        assert request["action_requests"][0]["name"] == "refund"
        assert request["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
        assert (await client.threads.get(tid))["status"] == "interrupted"

        resumed = await client.runs.wait(tid, "support", command={"resume": {"decisions": [{"type": "approve"}]}})
        assert text_of(resumed["messages"][-1]) == "Done: refunded B-42."
        assert "__interrupt__" not in resumed

        run = await client.runs.create(tid, "support", input=ask("where is C-7"))
        assert run["status"] in ("pending", "running") and run["assistant_id"] == "support"
        joined = await client.runs.join(tid, run["run_id"])
        assert text_of(joined["messages"][-1]) == "C-7 is shipped."
        assert (await client.runs.get(tid, run["run_id"]))["status"] == "success"
        state = await client.threads.get_state(tid)
        assert state["values"]["messages"] == joined["messages"]  # a run's end values are the thread's state
    finally:
        await client.aclose()


def test_the_sync_client_searches_creates_streams_resumes_waits_and_joins(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        assert [a["assistant_id"] for a in client.assistants.search()] == ["support"]
        tid = client.threads.create()["thread_id"]
        parts = list(client.runs.stream(tid, "support", input=USER, stream_mode=["values", "updates"]))
        assert parts[0].event == "metadata" and parts[-1].event == "end"
        assert ids_of(parts) == sorted(set(ids_of(parts)))

        waiting = client.runs.wait(tid, "support", input=ask("refund A-1"))
        assert waiting["__interrupt__"][0]["value"]["action_requests"][0]["args"] == {"order_id": "A-1"}
        edited = {"type": "edit", "edited_action": {"name": "refund", "args": {"order_id": "Z-9"}}}
        resumed = list(
            client.runs.stream(tid, "support", command={"resume": {"decisions": [edited]}}, stream_mode="values")
        )
        assert text_of(resumed[-2].data["messages"][-1]).endswith("refunded Z-9.")  # after the edit note

        run = client.runs.create(tid, "support", input=ask("where is D-1"))
        assert text_of(client.runs.join(tid, run["run_id"])["messages"][-1]) == "D-1 is shipped."
        history = client.threads.get_history(tid, limit=3)
        assert len(history) == 3 and history[0]["values"]["messages"][-1]["content"] == "D-1 is shipped."


# --- stream modes ------------------------------------------------------------------------------------------------


def test_values_are_the_thread_after_each_step_and_end_with_its_checkpoint(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, "support", input=ask("where is A-1"))
        parts = list(client.runs.stream(tid, "support", input=USER, stream_mode="values"))
        values = [p.data["messages"] for p in parts if p.event == "values"]
        assert [m["type"] for m in values[0]] == ["human", "ai", "tool", "ai", "human"]  # the thread + the question
        assert values[0][-1]["content"] == "where is B-42"
        assert [[m["type"] for m in v][4:] for v in values[1:]] == [
            ["human", "ai"],
            ["human", "ai", "tool"],
            ["human", "ai", "tool", "ai"],
        ]
        assert values[-1] == client.threads.get_state(tid)["values"]["messages"]
        assert values[-1][-3]["tool_calls"][0]["name"] == "get_order"


def test_updates_name_the_node_that_wrote_each_message(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        parts = [
            p for p in client.runs.stream(tid, "support", input=USER, stream_mode="updates") if p.event == "updates"
        ]
        assert [next(iter(p.data)) for p in parts] == ["model", "tools", "model"]
        assert parts[0].data["model"]["messages"][0]["tool_calls"][0]["args"] == {"order_id": "B-42"}
        tool = parts[1].data["tools"]["messages"][0]
        assert (tool["type"], tool["content"], tool["status"]) == ("tool", "order B-42: shipped", "success")
        assert parts[2].data["model"]["messages"][0]["content"] == "B-42 is shipped."


def test_messages_tuple_streams_tokens_tool_calls_and_results(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        parts = list(client.runs.stream(tid, "support", input=USER, stream_mode="messages-tuple"))
        tuples = [p.data for p in parts if p.event == "messages"]
        assert all(len(t) == 2 and t[1]["langgraph_node"] in ("model", "tools") for t in tuples)
        by_id: dict[str, str] = {}
        for message, _ in tuples:
            if message["type"] == "AIMessageChunk":
                by_id[message["id"]] = by_id.get(message["id"], "") + message["content"]
        assert list(by_id.values()) == ["Let me look. ", "B-42 is shipped."]
        calls = [c for m, _ in tuples for c in m.get("tool_call_chunks", [])]
        assert [(c["name"], c["args"]) for c in calls] == [("get_order", '{"order_id":"B-42"}')]
        results = [m for m, meta in tuples if m["type"] == "tool"]
        assert results[0]["tool_call_id"] == calls[0]["id"] and results[0]["content"] == "order B-42: shipped"


def test_custom_sends_what_a_tool_wrote_with_the_stream_writer(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        parts = list(client.runs.stream(tid, "support", input=USER, stream_mode=["custom"]))
        assert [(p.event, p.data) for p in parts[1:-1]] == [("custom", {"progress": "looking up B-42"})]


def test_all_modes_together_keep_the_sse_ids_increasing_and_v2_parts_parse(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        parts = list(client.runs.stream(tid, "support", input=USER, stream_mode=ALL_MODES, version="v2"))
        kinds = [p["type"] for p in parts]
        assert kinds[0] == "metadata" and {"values", "updates", "messages", "custom"} <= set(kinds)
        assert parts[-1]["type"] == "values" and parts[-1]["interrupts"] == []


# --- interrupts --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resume", "answer"),
    [
        ({"decisions": [{"type": "approve"}]}, "Done: refunded A-1."),
        ("approve", "Done: refunded A-1."),
        (
            {"decisions": [{"type": "edit", "edited_action": {"name": "refund", "args": {"order_id": "A-2"}}}]},
            "refunded A-2.",
        ),
        ({"decisions": [{"type": "reject", "message": "not this one"}]}, "not this one"),
    ],
)
def test_an_approval_waits_in_values_and_updates_and_command_resume_answers_it(
    url: str, resume: Any, answer: str
) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        parts = list(client.runs.stream(tid, "support", input=ask("refund A-1"), stream_mode=["values", "updates"]))
        (update,) = [p.data["__interrupt__"] for p in parts if p.event == "updates" and "__interrupt__" in p.data]
        last_values = [p.data for p in parts if p.event == "values"][-1]
        assert last_values["__interrupt__"] == update
        state = client.threads.get_state(tid)
        assert state["next"] == ["tools"] or state["interrupts"]
        assert state["interrupts"][0]["id"] == update[0]["id"]
        assert update[0]["value"]["action_requests"][0]["description"] == "Refund this order?"

        done = client.runs.wait(tid, "support", command={"resume": resume})
        assert answer in text_of(done["messages"][-1])
        assert client.threads.get(tid)["status"] == "idle"


def test_a_resume_keyed_by_interrupt_id_answers_that_interrupt(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        waiting = client.runs.wait(tid, "support", input=ask("refund A-1"))
        iid = waiting["__interrupt__"][0]["id"]
        done = client.runs.wait(tid, "support", command={"resume": {iid: {"decisions": [{"type": "approve"}]}}})
        assert text_of(done["messages"][-1]) == "Done: refunded A-1."


# --- background runs, cancel, double texting ----------------------------------------------------------------------


def test_cancel_stops_a_running_run_and_answers_its_open_tool_call(url: str, gate: Gate) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        run = client.runs.create(tid, "support", input=ask("slow k1"))
        wait_until(lambda: gate.started == 1, "the tool to start")
        assert client.runs.get(tid, run["run_id"])["status"] == "running"
        assert client.threads.get(tid)["status"] == "busy"
        client.runs.cancel(tid, run["run_id"], wait=True)
        cancelled = client.runs.get(tid, run["run_id"])
        assert cancelled["status"] == "interrupted" and cancelled.get("cancel_reason") == "cancelled"
        last = client.threads.get_state(tid)["values"]["messages"][-1]
        assert last["type"] == "tool" and last["status"] == "error"  # the open call was answered
        gate.event.set()
        after = client.runs.wait(tid, "support", input=USER)  # the thread takes new runs
        assert text_of(after["messages"][-1]) == "B-42 is shipped."


def test_multitask_reject_raises_and_enqueue_runs_after_the_running_run(url: str, gate: Gate) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        first = client.runs.create(tid, "support", input=ask("slow k1"))
        wait_until(lambda: gate.started == 1, "the tool to start")
        with pytest.raises(ConflictError, match="busy"):
            list(client.runs.stream(tid, "support", input=USER, multitask_strategy="reject"))
        with pytest.raises(ConflictError):
            client.runs.create(tid, "support", input=USER)  # reject is the default, as on a LangGraph Server
        second = client.runs.create(tid, "support", input=ask("where is E-5"), multitask_strategy="enqueue")
        assert client.runs.get(tid, second["run_id"])["status"] == "pending"
        gate.event.set()
        second_end = client.runs.join(tid, second["run_id"])
        assert client.runs.get(tid, first["run_id"])["status"] == "success"
        texts = [text_of(m) for m in second_end["messages"] if m["type"] == "ai" and not m["tool_calls"]]
        assert texts == ["Done: value of k1.", "E-5 is shipped."]  # both ran, in order
        runs = client.runs.list(tid)
        assert [r["run_id"] for r in runs] == [second["run_id"], first["run_id"]]


def test_multitask_interrupt_cancels_the_running_run_and_runs_the_new_one(url: str, gate: Gate) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        first = client.runs.create(tid, "support", input=ask("slow k1"))
        wait_until(lambda: gate.started == 1, "the tool to start")
        done = client.runs.wait(tid, "support", input=USER, multitask_strategy="interrupt")
        assert text_of(done["messages"][-1]) == "B-42 is shipped."
        assert client.runs.get(tid, first["run_id"])["status"] == "interrupted"


def test_multitask_rollback_cancels_the_running_run_and_drops_its_messages(url: str, gate: Gate) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        first = client.runs.create(tid, "support", input=ask("slow k1"))
        wait_until(lambda: gate.started == 1, "the tool to start")
        done = client.runs.wait(tid, "support", input=USER, multitask_strategy="rollback")
        assert text_of(done["messages"][-1]) == "B-42 is shipped."
        assert client.runs.get(tid, first["run_id"])["status"] == "interrupted"
        history = client.threads.get_state(tid)["values"]["messages"]
        assert not any("k1" in text_of(m) for m in history)  # the rolled-back run left nothing on the thread
        gate.event.set()


# --- rejoin ------------------------------------------------------------------------------------------------------


async def test_a_stream_cut_mid_run_is_rejoined_with_last_event_id_and_loses_or_repeats_nothing(
    url: str, gate: Gate
) -> None:
    client = get_client(url=url, api_key="alice-key")
    try:
        tid = (await client.threads.create())["thread_id"]
        first: list[StreamPart] = []
        stream = client.runs.stream(tid, "support", input=ask("slow k2"), stream_mode=ALL_MODES)
        async for part in stream:
            first.append(part)
            if part.event == "messages" and part.data[0].get("tool_call_chunks"):
                break  # the client goes away while the tool runs
        await stream.aclose()
        run_id = first[0].data["run_id"]
        gate.event.set()
        rest = [
            p async for p in client.runs.join_stream(tid, run_id, last_event_id=first[-1].id, stream_mode=ALL_MODES)
        ]
        assert rest[0].event != "metadata" and rest[-1].event == "end"
        whole = [p async for p in client.runs.join_stream(tid, run_id, stream_mode=ALL_MODES)]
        assert [(p.event, p.data) for p in first[1:] + rest] == [(p.event, p.data) for p in whole[1:]]
        cursors = ids_of(first) + ids_of(rest)
        assert cursors == ids_of(whole) and len(cursors) == len(set(cursors))  # none lost, none repeated
        assert await client.runs.get(tid, run_id) == await client.runs.get(tid, run_id)
    finally:
        await client.aclose()


async def test_two_clients_follow_one_run(url: str, gate: Gate) -> None:
    client = get_client(url=url, api_key="alice-key")
    try:
        tid = (await client.threads.create())["thread_id"]
        run = await client.runs.create(tid, "support", input=ask("slow k3"), stream_mode=["updates"])

        async def follow() -> list[Any]:
            return [(p.event, p.data) async for p in client.runs.join_stream(tid, run["run_id"])]

        followers = [asyncio.ensure_future(follow()) for _ in range(2)]
        await asyncio.sleep(0.2)
        gate.event.set()
        one, two = await asyncio.gather(*followers)
        assert one == two and one[-1] == ("end", None)
        assert [next(iter(data)) for event, data in one if event == "updates"] == ["model", "tools", "model"]
    finally:
        await client.aclose()


def test_another_users_threads_and_runs_are_not_found(url: str) -> None:
    with (
        get_sync_client(url=url, api_key="alice-key") as alice,
        get_sync_client(url=url, api_key="bob-key") as bob,
    ):
        tid = alice.threads.create()["thread_id"]
        run = alice.runs.create(tid, "support", input=USER)
        alice.runs.join(tid, run["run_id"])
        for call in (
            lambda: bob.threads.get(tid),
            lambda: bob.threads.get_state(tid),
            lambda: bob.runs.get(tid, run["run_id"]),
            lambda: bob.runs.join(tid, run["run_id"]),
            lambda: list(bob.runs.join_stream(tid, run["run_id"])),
            lambda: list(bob.runs.stream(tid, "support", input=USER)),
        ):
            with pytest.raises(httpx.HTTPStatusError) as refused:  # NotFoundError, or httpx's own for join
                call()
            assert refused.value.response.status_code == 404
        assert bob.threads.search() == [] and [t["thread_id"] for t in alice.threads.search()] == [tid]


def test_a_thread_less_run_waits_on_a_new_thread_of_the_callers(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as client:
        done = client.runs.wait(None, "support", input=USER)
        assert text_of(done["messages"][-1]) == "B-42 is shipped."
        (thread,) = client.threads.search()
        assert thread["values"]["messages"] == done["messages"] and thread["metadata"]["graph_id"] == "support"


def test_every_thread_names_its_owner_whoever_patches_its_metadata(url: str) -> None:
    with get_sync_client(url=url, api_key="alice-key") as alice, get_sync_client(url=url, api_key="bob-key") as bob:
        made = alice.threads.create(metadata={"owner": "mallory"})["thread_id"]
        alice.runs.wait("t-if-not-exists", "support", input=USER, if_not_exists="create")
        alice.runs.wait(None, "support", input=USER)
        patched = alice.threads.update(made, metadata={"owner": "bob", "topic": "orders"})
        assert patched["metadata"]["owner"] == "alice" and patched["metadata"]["topic"] == "orders"
        assert sorted(t["metadata"]["owner"] for t in alice.threads.search()) == ["alice"] * 3
        for call in (
            lambda: bob.threads.update(made, metadata={"topic": "x"}),
            lambda: bob.threads.get_history(made),
            lambda: bob.runs.list(made),
            lambda: bob.runs.wait(made, "support", input=USER, if_not_exists="create"),
        ):
            with pytest.raises(httpx.HTTPStatusError) as refused:
                call()
            assert refused.value.response.status_code == 404
        assert bob.threads.search() == []
