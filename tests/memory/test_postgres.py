from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _services import free_port
from langchain.agents import create_agent
from langchain_core.tools import tool

from ai_utils.exceptions import UserError
from ai_utils.memory import PostgresCheckpointSaver, postgres_saver
from ai_utils.testing import FakeChatModel


@tool
def slow_lookup(query: str) -> str:
    """Same name and schema as the tool in _agent_proc.py, so the graphs match."""
    return f"result for {query}"


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


async def test_agent_with_postgres_saver_keeps_history_between_sync_and_async_invokes(postgres_db: str) -> None:
    model = FakeChatModel(["Hallo Max!", "Du heisst Max."])
    with postgres_saver(postgres_db) as saver:
        agent = create_agent(model=model, tools=[], checkpointer=saver)
        await agent.ainvoke({"messages": [("user", "Ich heisse Max")]}, _config("t"), durability="sync")
        # the sync API of the same saver, from a worker thread (sync code inside an async app)
        import anyio.to_thread

        await anyio.to_thread.run_sync(
            lambda: agent.invoke({"messages": [("user", "Wie heisse ich?")]}, _config("t"), durability="sync")
        )

    assert [str(m.text) for m in model.calls[1]] == ["Ich heisse Max", "Hallo Max!", "Wie heisse ich?"]
    assert saver.pool.closed


def test_kill_9_mid_tool_with_durability_sync_loses_no_postgres_checkpoint_and_resumes(
    postgres_db: str, agent_process: Any, tmp_path: Path
) -> None:
    tool_call = {"tool_calls": [{"name": "slow_lookup", "args": {"query": "Rom"}, "id": "call-rom"}]}

    agent_process.run_until_killed(postgres_db, "trip", "Suche nach Rom", [tool_call], tmp_path)

    with postgres_saver(postgres_db) as saver:
        agent = create_agent(model=FakeChatModel(["unused"]), tools=[slow_lookup], checkpointer=saver)
        state = agent.get_state(_config("trip"))
        before_resume = {t.config["configurable"]["checkpoint_id"] for t in saver.list(_config("trip"))}
    assert state.next == ("tools",)
    assert state.values["messages"][-1].tool_calls[0]["id"] == "call-rom"

    resumed = agent_process.run(postgres_db, "trip", None, ["Rom ist schoen."])

    assert resumed["calls"] == [["Suche nach Rom", "", "result for Rom"]]
    assert resumed["messages"][-1] == ["ai", "Rom ist schoen."]
    with postgres_saver(postgres_db) as saver:
        after_resume = {t.config["configurable"]["checkpoint_id"] for t in saver.list(_config("trip"))}
    assert before_resume < after_resume


def test_several_savers_starting_at_once_set_up_the_schema_once(postgres_db: str) -> None:
    savers: list[PostgresCheckpointSaver] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            savers.append(postgres_saver(postgres_db, max_size=1))
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    workers = [threading.Thread(target=start) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for saver in savers:
        saver.close()
    assert errors == [] and len(savers) == 4
    with psycopg.connect(postgres_db) as conn:
        versions = [row[0] for row in conn.execute("select v from checkpoint_migrations order by v")]
    assert versions == sorted(set(versions))  # every migration recorded exactly once


def test_postgres_saver_errors_never_show_the_password() -> None:
    uri = f"postgresql://app:hunter2secret@127.0.0.1:{free_port()}/app"
    with pytest.raises(UserError) as caught:
        postgres_saver(uri)
    assert "hunter2secret" not in str(caught.value)
    assert "app@127.0.0.1" in str(caught.value)


def test_postgres_saver_repr_hides_the_password(postgres_db: str) -> None:
    with postgres_saver(postgres_db) as saver:
        assert repr(saver).startswith("PostgresCheckpointSaver(postgres@")


@pytest.mark.parametrize("bad", [123, None, "", "  "])
def test_postgres_saver_rejects_a_value_that_is_not_a_connection_string(bad: Any) -> None:
    with pytest.raises(UserError, match="connection string"):
        postgres_saver(bad)


def test_postgres_saver_rejects_an_unparseable_string_without_echoing_it() -> None:
    with pytest.raises(UserError, match="could not parse") as caught:
        postgres_saver("host=x password=topsecret this is = not valid")
    assert "topsecret" not in str(caught.value)


@pytest.mark.parametrize(("kwargs", "argument"), [({"max_size": 0}, "max_size"), ({"min_size": -1}, "min_size")])
def test_postgres_saver_rejects_bad_pool_sizes(postgres_db: str, kwargs: dict[str, int], argument: str) -> None:
    with pytest.raises(UserError, match=argument):
        postgres_saver(postgres_db, **kwargs)


def test_postgres_saver_gives_up_when_another_process_holds_the_setup_lock(postgres_db: str) -> None:
    from ai_utils.memory.postgres import _SETUP_LOCK_KEY

    with psycopg.connect(postgres_db, autocommit=True) as holder:
        holder.execute("select pg_advisory_lock(%s)", (_SETUP_LOCK_KEY,))
        with pytest.raises(UserError, match="waited too long"):
            PostgresCheckpointSaver(postgres_db, timeout=0.2)


async def test_postgres_saver_prunes_a_thread_to_its_latest_checkpoint(postgres_db: str) -> None:
    with postgres_saver(postgres_db) as saver:
        agent = create_agent(model=FakeChatModel(["a", "b"]), tools=[], checkpointer=saver)
        await agent.ainvoke({"messages": [("user", "eins")]}, _config("p"))
        await agent.ainvoke({"messages": [("user", "zwei")]}, _config("p"))
        assert len([t async for t in saver.alist(_config("p"))]) > 1

        await saver.aprune(["p"])

        remaining = [t async for t in saver.alist(_config("p"))]
        state = await agent.aget_state(_config("p"))
    assert len(remaining) == 1
    assert [m.text for m in state.values["messages"]] == ["eins", "a", "zwei", "b"]
