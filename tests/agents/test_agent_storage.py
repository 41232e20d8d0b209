"""An Agent thread's stored bytes grow linearly with the conversation (delta-stored messages).

A plain LangGraph messages channel writes the whole history into every checkpoint, so its bytes grow with
the square of the thread's length; the Agent's DeltaChannel state stores each step's new messages (plus a
snapshot every few dozen updates). Both run on a real SQLite file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from ai_utils import Agent
from ai_utils.testing import static_model

REPLY = "r" * 1000
QUESTION = "q" * 1000


def stored_bytes(conn: sqlite3.Connection) -> int:
    checkpoints = conn.execute("SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints")
    writes = conn.execute("SELECT coalesce(sum(length(value)), 0) FROM writes")
    return int(checkpoints.fetchone()[0]) + int(writes.fetchone()[0])


def bytes_after(
    turns: tuple[int, ...], db: Path, make_turn: Callable[[SqliteSaver], Callable[[], object]]
) -> list[int]:
    conn = sqlite3.connect(db, check_same_thread=False)
    conn.execute("PRAGMA synchronous=NORMAL")
    try:
        run = make_turn(SqliteSaver(conn))
        sizes = []
        for turn in range(1, max(turns) + 1):
            run()
            if turn in turns:
                sizes.append(stored_bytes(conn))
        return sizes
    finally:
        conn.close()


def test_agent_thread_storage_grows_linearly_while_a_plain_messages_channel_grows_quadratically(
    tmp_path: Path,
) -> None:
    def agent_turn(saver: SqliteSaver) -> Callable[[], object]:
        agent = Agent(llm=static_model(REPLY), checkpointer=saver)
        return lambda: agent.invoke(QUESTION, thread_id="max")

    def plain_turn(saver: SqliteSaver) -> Callable[[], object]:
        graph = create_agent(static_model(REPLY), [], checkpointer=saver)
        return lambda: graph.invoke({"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": "max"}})

    ours_30, ours_60 = bytes_after((30, 60), tmp_path / "agent.sqlite", agent_turn)
    plain_30, plain_60 = bytes_after((30, 60), tmp_path / "plain.sqlite", plain_turn)

    # Twice the turns: about twice the bytes (snapshots add a little), against about four times.
    assert ours_60 / ours_30 < 2.6, (ours_30, ours_60)
    assert plain_60 / plain_30 > 3.5, (plain_30, plain_60)
    assert ours_60 < plain_60 / 10, (ours_60, plain_60)
    # 60 turns hold 120 KB of text; the Agent stores a small multiple of that.
    assert ours_60 < 8 * 60 * (len(QUESTION) + len(REPLY)), ours_60
