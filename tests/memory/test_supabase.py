from __future__ import annotations

import importlib.resources
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Any

import anyio
import httpx
import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.base import ERROR, Checkpoint, empty_checkpoint
from supabase import ClientOptions, acreate_client, create_client

from ai_utils.exceptions import UserError
from ai_utils.memory import SupabaseCheckpointSaver
from ai_utils.memory.supabase import SupabaseCheckpointError, supabase_checkpoints_sql
from ai_utils.testing import FakeChatModel


def _config(thread: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _checkpoint(value: str) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"value": value}
    checkpoint["channel_versions"] = {"value": "1"}
    return checkpoint


def test_concurrent_writers_to_one_thread_lose_no_checkpoint_or_write(supabase_checkpoints: Any) -> None:
    saver = supabase_checkpoints.fresh_saver()
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            for step in range(6):
                stored = saver.put(_config("shared"), _checkpoint(f"w{index}-s{step}"), {"step": step}, {})
                saver.put_writes(stored, [("value", f"write {index}-{step}"), ("other", step)], f"task-{index}")
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    workers = [threading.Thread(target=writer, args=(index,)) for index in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert errors == []
    tuples = list(saver.list(_config("shared")))
    assert sorted(t.checkpoint["channel_values"]["value"] for t in tuples) == sorted(
        f"w{i}-s{s}" for i in range(6) for s in range(6)
    )
    for item in tuples:
        index, step = item.checkpoint["channel_values"]["value"][1:].split("-s")
        assert item.pending_writes == [
            (f"task-{index}", "value", f"write {index}-{step}"),
            (f"task-{index}", "other", int(step)),
        ]
    ids = [t.checkpoint["id"] for t in tuples]
    assert ids == sorted(ids, reverse=True)  # newest first


async def test_concurrent_async_writers_to_one_thread_lose_nothing(supabase_checkpoints: Any) -> None:
    saver = supabase_checkpoints.fresh_saver()

    async def writer(index: int) -> None:
        stored = await saver.aput(_config("shared"), _checkpoint(f"a{index}"), {"step": index}, {})
        await saver.aput_writes(stored, [("value", index)], f"task-{index}")

    async with anyio.create_task_group() as group:
        for index in range(20):
            group.start_soon(writer, index)

    tuples = [t async for t in saver.alist(_config("shared"))]
    assert sorted(t.checkpoint["channel_values"]["value"] for t in tuples) == sorted(f"a{i}" for i in range(20))
    assert all(len(t.pending_writes or []) == 1 for t in tuples)


async def test_agent_with_supabase_saver_keeps_history_across_sync_and_async_invokes(supabase_checkpoints: Any) -> None:
    saver = supabase_checkpoints.fresh_saver()
    model = FakeChatModel(["Hallo Max!", "Du heisst Max."])
    agent = create_agent(model=model, tools=[], checkpointer=saver)
    await anyio.to_thread.run_sync(
        lambda: agent.invoke({"messages": [("user", "Ich heisse Max")]}, {"configurable": {"thread_id": "max"}})
    )
    result = await agent.ainvoke(
        {"messages": [("user", "Wie heisse ich?")]}, {"configurable": {"thread_id": "max"}}, durability="sync"
    )
    assert [str(m.text) for m in model.calls[1]] == ["Ich heisse Max", "Hallo Max!", "Wie heisse ich?"]
    assert result["messages"][-1].text == "Du heisst Max."


def test_list_pages_through_many_checkpoints_and_honours_before_limit_and_filter(supabase_checkpoints: Any) -> None:
    saver = SupabaseCheckpointSaver(supabase_checkpoints.client, table=supabase_checkpoints.table, page_size=2)
    parent: str | None = None
    ids = []
    for step in range(5):
        stored = saver.put(_config("p", parent), _checkpoint(f"s{step}"), {"step": step, "source": "loop"}, {})
        saver.put_writes(stored, [("value", f"a{step}"), ("value", f"b{step}"), ("value", f"c{step}")], "t")
        parent = stored["configurable"]["checkpoint_id"]
        ids.append(parent)
    saver.put(_config("other"), _checkpoint("x"), {"step": 0, "source": "input"}, {})

    listed = list(saver.list(_config("p")))
    assert [t.checkpoint["id"] for t in listed] == ids[::-1]
    assert [len(t.pending_writes or []) for t in listed] == [3] * 5
    assert listed[0].parent_config == _config("p", ids[3])
    assert [t.checkpoint["id"] for t in saver.list(_config("p"), limit=3)] == ids[:1:-1]
    assert [t.checkpoint["id"] for t in saver.list(_config("p"), limit=4)] == ids[:0:-1]  # two full pages
    assert [t.checkpoint["id"] for t in saver.list(_config("p"), before=_config("p", ids[2]))] == [ids[1], ids[0]]
    assert [t.metadata["step"] for t in saver.list(None, filter={"source": "loop", "step": 3})] == [3]
    assert len(list(saver.list(None))) == 6
    assert [t.checkpoint["id"] for t in saver.list(_config("p", ids[2]))] == [ids[2]]


def test_regular_writes_keep_the_first_value_and_error_writes_replace(supabase_checkpoints: Any) -> None:
    saver = supabase_checkpoints.fresh_saver()
    stored = saver.put(_config("w"), _checkpoint("v"), {}, {})
    saver.put_writes(stored, [("value", "first")], "task")
    saver.put_writes(stored, [("value", "second")], "task")
    saver.put_writes(stored, [(ERROR, "boom 1")], "task")
    saver.put_writes(stored, [(ERROR, "boom 2")], "task")
    saver.put_writes(stored, [], "task")

    item = saver.get_tuple(stored)
    assert item is not None
    assert sorted(item.pending_writes or []) == [("task", ERROR, "boom 2"), ("task", "value", "first")]


def test_metadata_with_non_json_values_and_nul_characters_is_stored(supabase_checkpoints: Any) -> None:
    saver = supabase_checkpoints.fresh_saver()
    when = datetime(2026, 1, 2, tzinfo=UTC)
    metadata: Any = {"source": "in\x00put", "extra": {"when": when, "tags": ("a", "b\x00")}}
    stored = saver.put(_config("m"), _checkpoint("v"), metadata, {})

    item = saver.get_tuple(stored)
    assert item is not None
    assert item.metadata == {"source": "input", "extra": {"when": str(when), "tags": ["a", "b"]}}


def test_delete_thread_removes_only_that_thread(supabase_checkpoints: Any) -> None:
    saver = supabase_checkpoints.fresh_saver()
    for thread in ("keep", "drop"):
        stored = saver.put(_config(thread), _checkpoint(thread), {}, {})
        saver.put_writes(stored, [("value", 1)], "t")
    saver.delete_thread("drop")
    assert saver.get_tuple(_config("drop")) is None
    kept = saver.get_tuple(_config("keep"))
    assert kept is not None and kept.pending_writes == [("t", "value", 1)]


def test_channel_versions_increase(supabase_checkpoints: Any) -> None:
    saver = supabase_checkpoints.fresh_saver()
    first = saver.get_next_version(None, None)
    second = saver.get_next_version(first, None)
    assert first < second and second.startswith("0" * 31 + "2.")
    assert saver.get_next_version(7, None).startswith("0" * 31 + "8.")  # type: ignore[arg-type]


def test_a_missing_table_says_which_sql_to_run(supabase_client: Any) -> None:
    saver = SupabaseCheckpointSaver(supabase_client, table="no_such_table")
    with pytest.raises(UserError, match=r"supabase_checkpoints_sql\('no_such_table'\)"):
        saver.get_tuple(_config("x"))


def test_the_anon_key_is_refused_without_leaking_the_key(supabase_checkpoints: Any) -> None:
    stack = supabase_checkpoints.stack
    with httpx.Client(timeout=30) as http:
        client = create_client(stack.url, stack.anon_key, options=ClientOptions(httpx_client=http))
        anon = SupabaseCheckpointSaver(client, table="test_checkpoints")
        with pytest.raises(SupabaseCheckpointError, match="service role") as caught:
            anon.put(_config("x"), _checkpoint("v"), {}, {})
    assert caught.value.code == "42501"
    assert stack.anon_key not in str(caught.value) and stack.anon_key not in repr(anon)


def test_the_anon_key_cannot_read_a_checkpoint_through_the_read_function(supabase_checkpoints: Any) -> None:
    saver = supabase_checkpoints.fresh_saver()
    stored = saver.put(_config("secret"), _checkpoint("private"), {}, {})
    stack = supabase_checkpoints.stack
    with httpx.Client(timeout=30) as http:
        client = create_client(stack.url, stack.anon_key, options=ClientOptions(httpx_client=http))
        anon = SupabaseCheckpointSaver(client, table="test_checkpoints")
        with pytest.raises(SupabaseCheckpointError, match="service role") as caught:
            anon.get_tuple(stored)
    assert caught.value.code == "42501" and "private" not in str(caught.value)


def test_put_and_get_tuple_take_one_request_each_and_return_the_pending_writes(supabase_checkpoints: Any) -> None:
    requests: list[str] = []
    stack = supabase_checkpoints.stack
    with httpx.Client(timeout=30, event_hooks={"request": [lambda r: requests.append(r.url.path)]}) as http:
        client = create_client(stack.url, stack.service_key, options=ClientOptions(httpx_client=http))
        saver = SupabaseCheckpointSaver(client, table=supabase_checkpoints.table)
        first = saver.put(_config("one"), _checkpoint("a"), {"step": 1}, {})
        saver.put_writes(first, [("value", "w1"), ("other", "w2")], "task-b")
        saver.put_writes(first, [("value", "w0")], "task-a")
        requests.clear()
        second = saver.put(first, _checkpoint("b"), {"step": 2}, {})
        assert requests == ["/rest/v1/rpc/test_checkpoints_put"]
        requests.clear()
        older = saver.get_tuple(first)
        latest = saver.get_tuple(_config("one"))
        assert requests == ["/rest/v1/rpc/test_checkpoints_get_tuple"] * 2
        assert saver.get_tuple(_config("one", "no-such-id")) is None
        assert saver.get_tuple(_config("nobody")) is None
    assert older is not None and older.pending_writes == [
        ("task-a", "value", "w0"),
        ("task-b", "value", "w1"),
        ("task-b", "other", "w2"),
    ]
    assert latest is not None and latest.config == second and latest.parent_config == first
    assert latest.checkpoint["channel_values"] == {"value": "b"} and latest.metadata["step"] == 2
    assert latest.pending_writes == []


def test_the_saver_sends_the_request_supabase_py_sends_and_follows_a_token_change(supabase_checkpoints: Any) -> None:
    sent: list[httpx.Request] = []
    stack = supabase_checkpoints.stack
    with httpx.Client(timeout=30, event_hooks={"request": [sent.append]}) as http:
        client = create_client(stack.url, stack.service_key, options=ClientOptions(httpx_client=http))
        saver = SupabaseCheckpointSaver(client, table=supabase_checkpoints.table)
        stored = saver.put(_config("same"), _checkpoint("ü"), {"note": "naïve"}, {})
        params = {
            "p_thread_id": "same",
            "p_checkpoint_ns": "",
            "p_checkpoint_id": stored["configurable"]["checkpoint_id"],
        }
        sent.clear()
        ours = saver.get_tuple(stored)
        theirs = client.rpc(f"{supabase_checkpoints.table}_get_tuple", params).execute().data
        assert [(r.method, r.url) for r in sent[:1]] == [(r.method, r.url) for r in sent[1:]]
        ours_headers, theirs_headers = ({k: v for k, v in r.headers.items() if k != "content-length"} for r in sent)
        assert ours_headers == theirs_headers and ours_headers["authorization"] == f"Bearer {stack.service_key}"
        assert httpx.Response(200, content=sent[0].content).json() == params
        assert ours is not None and ours.checkpoint["channel_values"] == {"value": "ü"}
        assert theirs["checkpoint"]["metadata"]["note"] == "naïve"
        # The next step: the client switches to another user's token; the saver's next call carries it.
        client.postgrest.auth(stack.anon_key)
        with pytest.raises(SupabaseCheckpointError) as caught:
            saver.get_tuple(stored)
    assert caught.value.code == "42501" and sent[-1].headers["authorization"] == f"Bearer {stack.anon_key}"


@contextmanager
def _client_of(handler: type[BaseHTTPRequestHandler]) -> Iterator[Any]:
    """A Supabase client of a local stand-in server answering with ``handler`` (stopped on exit)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with httpx.Client(timeout=5) as http:
            url = f"http://127.0.0.1:{server.server_address[1]}"
            yield create_client(url, "key", options=ClientOptions(httpx_client=http))
    finally:
        server.shutdown()
        server.server_close()


def test_an_error_page_that_is_not_postgrest_json_names_the_status() -> None:
    # A gateway in front of PostgREST may answer with its own page (e.g. 502 text/html).
    class Gateway(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = b"<html>bad gateway</html>"
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    with _client_of(Gateway) as client, pytest.raises(SupabaseCheckpointError, match="Bad Gateway") as caught:
        SupabaseCheckpointSaver(client).put(_config("x"), _checkpoint("v"), {}, {})
    assert caught.value.code == "502"


def test_tables_from_an_older_sql_without_the_functions_say_to_run_the_sql_again(
    supabase_stack: Any, supabase_client: Any
) -> None:
    sql = supabase_checkpoints_sql("older_memory")
    tables_only = sql[: sql.index("-- One round trip")]
    supabase_stack.run_sql(tables_only, wait_for="older_memory")
    saver = SupabaseCheckpointSaver(supabase_client, table="older_memory")
    with pytest.raises(UserError, match=r"tables and functions .*supabase_checkpoints_sql\('older_memory'\)"):
        saver.put(_config("o"), _checkpoint("v"), {}, {})
    supabase_stack.run_sql(sql, wait_for="older_memory")
    stored = saver.put(_config("o"), _checkpoint("v"), {}, {})
    assert saver.get_tuple(stored) is not None


async def test_an_async_supabase_client_is_refused_with_the_fix(supabase_stack: Any) -> None:
    client = await acreate_client(supabase_stack.url, supabase_stack.service_key)
    with pytest.raises(UserError, match="sync supabase client"):
        SupabaseCheckpointSaver(client)


@pytest.mark.parametrize("bad", [None, "http://x", SupabaseCheckpointSaver])
def test_a_value_that_is_not_a_client_is_refused(bad: Any) -> None:
    with pytest.raises(UserError, match="needs a supabase client"):
        SupabaseCheckpointSaver(bad)


@pytest.mark.parametrize("table", ["Checkpoints", "x; drop table y", "", 5, "a" * 60])
def test_a_table_name_that_is_not_a_plain_identifier_is_refused(supabase_client: Any, table: Any) -> None:
    with pytest.raises(UserError, match="table must be"):
        SupabaseCheckpointSaver(supabase_client, table=table)


@pytest.mark.parametrize("page_size", [0, 1001, True, "10"])
def test_a_page_size_out_of_range_is_refused(supabase_client: Any, page_size: Any) -> None:
    with pytest.raises(UserError, match="page_size"):
        SupabaseCheckpointSaver(supabase_client, page_size=page_size)


def test_the_shipped_sql_creates_the_default_tables_and_renames_for_another_table() -> None:
    shipped = importlib.resources.files("ai_utils.memory").joinpath("supabase_checkpoints.sql").read_text()
    assert "create table if not exists public.checkpoints (" in shipped
    assert "create table if not exists public.checkpoints_writes (" in shipped
    assert supabase_checkpoints_sql() == shipped
    renamed = supabase_checkpoints_sql("chat_memory")
    assert "public.chat_memory (" in renamed and "public.chat_memory_writes (" in renamed
    assert "chat_memory_metadata_idx" in renamed and "public.checkpoints" not in renamed


def test_the_renamed_sql_runs_and_the_saver_uses_the_new_tables(supabase_stack: Any, supabase_client: Any) -> None:
    supabase_stack.run_sql(supabase_checkpoints_sql("renamed_memory"), wait_for="renamed_memory_writes")
    saver = SupabaseCheckpointSaver(supabase_client, table="renamed_memory")
    stored = saver.put(_config("r"), _checkpoint("v"), {}, {})
    item = saver.get_tuple(stored)
    assert item is not None and item.checkpoint["channel_values"] == {"value": "v"}
    assert repr(saver) == "SupabaseCheckpointSaver(table='renamed_memory')"


def test_an_error_without_details_says_so_and_suggests_a_retry() -> None:
    # PostgREST answers `404 {}` for a moment while it reloads its schema cache; a stub server replays that.
    class Bare(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def do_POST(self) -> None:  # reads go through the saver's `/rpc` functions
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.do_GET()

        def log_message(self, format: str, *args: object) -> None:
            return

    with _client_of(Bare) as client, pytest.raises(SupabaseCheckpointError, match="no details. Retry") as caught:
        SupabaseCheckpointSaver(client).get_tuple(_config("x"))
    assert caught.value.code is None


def _delta_graph(snapshot_frequency: int) -> Any:
    from langchain_core.messages import AIMessage, AnyMessage
    from langgraph.channels.delta import DeltaChannel
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from typing_extensions import TypedDict

    def reducer(state: Any, writes: Any) -> Any:
        messages = list(state or [])
        for write in writes:
            messages = add_messages(messages, write)
        return messages

    channel = DeltaChannel(reducer, snapshot_frequency=snapshot_frequency)
    State = TypedDict("State", {"messages": Annotated[list[AnyMessage], channel]})  # noqa: UP013

    def echo(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo {len(state['messages'])}", id=f"ai-{len(state['messages'])}")]}

    graph = StateGraph(State)
    graph.add_node("echo", echo)
    graph.add_edge(START, "echo")
    graph.add_edge("echo", END)
    return graph


@pytest.mark.parametrize("snapshot_frequency", [100, 3])
def test_delta_channel_history_matches_langgraphs_walk_in_no_more_requests(
    supabase_checkpoints: Any, snapshot_frequency: int
) -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.base import BaseCheckpointSaver

    requests: list[str] = []
    stack = supabase_checkpoints.stack
    supabase_checkpoints.truncate()
    with httpx.Client(timeout=30, event_hooks={"request": [lambda r: requests.append(r.url.path)]}) as http:
        client = create_client(stack.url, stack.service_key, options=ClientOptions(httpx_client=http))
        saver = SupabaseCheckpointSaver(client, table=supabase_checkpoints.table)
        graph = _delta_graph(snapshot_frequency).compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "deep"}}
        for turn in range(6):
            graph.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, config)
        fork_from = list(saver.list(config))[4].config  # an older checkpoint: the next run forks the thread
        graph.invoke({"messages": [HumanMessage("fork", id="hf")]}, fork_from)

        for item in saver.list(config):
            expected = BaseCheckpointSaver.get_delta_channel_history(saver, config=item.config, channels=["messages"])
            assert saver.get_delta_channel_history(config=item.config, channels=["messages"]) == expected
        latest = saver.get_tuple(config)
        assert latest is not None
        requests.clear()
        BaseCheckpointSaver.get_delta_channel_history(saver, config=latest.config, channels=["messages"])
        default_requests = len(requests)
        requests.clear()
        history = saver.get_delta_channel_history(config=latest.config, channels=["messages", "absent"])
        fewer = len(requests)
        assert saver.get_delta_channel_history(config=latest.config, channels=[]) == {}
        assert graph.get_state(config).values["messages"][-2].text == "fork"

    # One request per ancestor for LangGraph's walk (get_tuple is a single `/rpc` call); ours reads pages.
    assert fewer <= min(4, default_requests), (fewer, default_requests)
    assert history["absent"] == {"writes": []}
