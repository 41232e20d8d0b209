from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from ai_utils.exceptions import UserError
from ai_utils.memory import SqliteCheckpointSaver, sqlite_saver
from ai_utils.testing import FakeChatModel


@tool
def slow_lookup(query: str) -> str:
    """Same name and schema as the tool in _agent_proc.py, so the graphs match."""
    return f"result for {query}"


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _texts(call: list[Any]) -> list[str]:
    return [str(m.text) for m in call]


def test_agent_with_sqlite_saver_keeps_history_between_sync_and_async_invokes(tmp_path: Path) -> None:
    model = FakeChatModel(["Hallo Max!", "Du heisst Max.", "Gern."])
    with sqlite_saver(tmp_path / "cp.sqlite") as saver:
        agent = create_agent(model=model, tools=[], checkpointer=saver)
        agent.invoke({"messages": [("user", "Ich heisse Max")]}, _config("t"), durability="sync")

        async def second_turn() -> None:
            await agent.ainvoke({"messages": [("user", "Wie heisse ich?")]}, _config("t"), durability="sync")

        import anyio

        anyio.run(second_turn)  # a second event loop: the saver is not bound to one
        agent.invoke({"messages": [("user", "Danke")]}, _config("t"))

    assert _texts(model.calls[1]) == ["Ich heisse Max", "Hallo Max!", "Wie heisse ich?"]
    assert _texts(model.calls[2])[-1] == "Danke" and len(model.calls[2]) == 5


async def test_one_sqlite_saver_serves_concurrent_async_threads(tmp_path: Path) -> None:
    import anyio

    saver = sqlite_saver(tmp_path / "cp.sqlite")
    model = FakeChatModel(["ok"], cycle=True)
    agent = create_agent(model=model, tools=[], checkpointer=saver)

    async def chat(thread: str) -> None:
        for turn in range(3):
            await agent.ainvoke({"messages": [("user", f"{thread} {turn}")]}, _config(thread), durability="sync")

    async with anyio.create_task_group() as group:
        for index in range(5):
            group.start_soon(chat, f"thread-{index}")

    for index in range(5):
        state = await agent.aget_state(_config(f"thread-{index}"))
        assert [m.text for m in state.values["messages"] if m.type == "human"] == [
            f"thread-{index} {turn}" for turn in range(3)
        ]
    saver.close()


def test_history_survives_a_new_process(tmp_path: Path, agent_process: Any) -> None:
    backend = f"sqlite:{tmp_path / 'nested' / 'dir' / 'cp.sqlite'}"

    first = agent_process.run(backend, "max", "Ich heisse Max", ["Hallo Max!"])
    second = agent_process.run(backend, "max", "Wie heisse ich?", ["Du heisst Max."])

    assert first["calls"] == [["Ich heisse Max"]]
    assert second["calls"] == [["Ich heisse Max", "Hallo Max!", "Wie heisse ich?"]]
    assert second["messages"][-1] == ["ai", "Du heisst Max."]


def test_kill_9_mid_tool_with_durability_sync_loses_no_checkpoint_and_resumes(
    tmp_path: Path, agent_process: Any
) -> None:
    path = tmp_path / "cp.sqlite"
    tool_call = {"tool_calls": [{"name": "slow_lookup", "args": {"query": "Rom"}, "id": "call-rom"}]}

    agent_process.run_until_killed(f"sqlite:{path}", "trip", "Suche nach Rom", [tool_call], tmp_path)

    with sqlite_saver(path) as saver:
        agent = create_agent(model=FakeChatModel(["unused"]), tools=[slow_lookup], checkpointer=saver)
        state = agent.get_state(_config("trip"))
        before_resume = {t.config["configurable"]["checkpoint_id"] for t in saver.list(_config("trip"))}
    assert state.next == ("tools",)  # the model step was committed before the kill
    assert isinstance(state.values["messages"][-1], AIMessage)
    assert state.values["messages"][-1].tool_calls[0]["id"] == "call-rom"

    resumed = agent_process.run(f"sqlite:{path}", "trip", None, ["Rom ist schoen."])

    assert resumed["calls"] == [["Suche nach Rom", "", "result for Rom"]]  # the model was not asked again
    assert [kind for kind, _ in resumed["messages"]] == ["human", "ai", "tool", "ai"]
    assert resumed["messages"][-1] == ["ai", "Rom ist schoen."]
    with sqlite_saver(path) as saver:
        after_resume = {t.config["configurable"]["checkpoint_id"] for t in saver.list(_config("trip"))}
    assert before_resume < after_resume


def test_sqlite_saver_creates_parent_folders_and_uses_wal_with_normal_sync(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "cp.sqlite"
    with sqlite_saver(path) as saver:
        assert saver.conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert saver.conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert repr(saver) == f"SqliteCheckpointSaver(path={str(path)!r})"
    assert path.exists()


def test_sqlite_saver_in_memory_keeps_a_thread_within_the_process() -> None:
    saver = sqlite_saver(":memory:")
    agent = create_agent(model=FakeChatModel(["a", "b"]), tools=[], checkpointer=saver)
    agent.invoke({"messages": [("user", "eins")]}, _config("m"))
    result = agent.invoke({"messages": [("user", "zwei")]}, _config("m"))
    assert [m.text for m in result["messages"]] == ["eins", "a", "zwei", "b"]
    assert isinstance(saver, SqliteCheckpointSaver)
    saver.close()


def test_sqlite_saver_is_usable_from_several_threads(tmp_path: Path) -> None:
    saver = sqlite_saver(tmp_path / "cp.sqlite")
    agent = create_agent(model=FakeChatModel(["ok"], cycle=True), tools=[], checkpointer=saver)
    errors: list[BaseException] = []

    def chat(index: int) -> None:
        try:
            agent.invoke({"messages": [("user", f"hi {index}")]}, _config(f"t{index}"), durability="sync")
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    workers = [threading.Thread(target=chat, args=(index,)) for index in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {f"t{i}" for i in range(6)}
    saver.close()


@pytest.mark.parametrize("bad", [123, None, b"cp.sqlite", "", "   ", True])
def test_sqlite_saver_rejects_a_value_that_is_not_a_path(bad: Any) -> None:
    with pytest.raises(UserError, match="sqlite_saver"):
        sqlite_saver(bad)


def test_sqlite_saver_rejects_a_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="folder"):
        sqlite_saver(tmp_path)


def test_sqlite_saver_rejects_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("this is not a database " * 100)
    with pytest.raises(UserError, match="not open"):
        sqlite_saver(path)


def test_a_closed_sqlite_saver_refuses_further_use(tmp_path: Path) -> None:
    saver = sqlite_saver(tmp_path / "cp.sqlite")
    saver.close()
    with pytest.raises(sqlite3.ProgrammingError):
        saver.get_tuple(_config("x"))
