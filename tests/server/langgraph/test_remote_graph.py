"""`RemoteGraph(url=...)` — LangGraph's own client of a LangGraph Server — as a node of a local LangGraph graph,
served by `langgraph_api_routes`: answers merge into the local thread (no second copy of the question), a
thread-less call, an approval answered with ``Command(resume=...)``, tokens as ``messages``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.pregel.remote import RemoteGraph
from langgraph.types import Command


@pytest.fixture
def remote(url: str) -> Iterator[RemoteGraph]:
    graph = RemoteGraph("support", url=url, api_key="alice-key")
    yield graph
    assert graph.sync_client is not None
    graph.sync_client.close()  # RemoteGraph never closes the clients it makes


def local_graph(remote: RemoteGraph, *, checkpointer: bool = True) -> object:
    builder = StateGraph(MessagesState)
    builder.add_node("support", remote)
    builder.add_edge(START, "support")
    return builder.compile(checkpointer=InMemorySaver() if checkpointer else None)


def test_remote_graph_as_a_node_answers_into_the_local_thread(remote: RemoteGraph) -> None:
    graph = local_graph(remote)
    config = {"configurable": {"thread_id": "local-1"}}
    first = graph.invoke({"messages": [HumanMessage("where is B-42")]}, config)  # type: ignore[attr-defined]
    assert [m.type for m in first["messages"]] == ["human", "ai", "tool", "ai"]
    assert first["messages"][-1].content == "B-42 is shipped."
    second = graph.invoke({"messages": [HumanMessage("where is C-3")]}, config)  # type: ignore[attr-defined]
    assert [m.type for m in second["messages"]] == ["human", "ai", "tool", "ai"] * 2
    assert second["messages"][:4] == first["messages"]  # ids kept across calls: merged, not appended again
    assert second["messages"][-1].content == "C-3 is shipped."


def test_remote_graph_without_a_local_checkpointer_runs_on_a_new_thread(remote: RemoteGraph) -> None:
    graph = local_graph(remote, checkpointer=False)
    out = graph.invoke({"messages": [HumanMessage("where is D-4")]})  # type: ignore[attr-defined]
    assert isinstance(out["messages"][-1], AIMessage) and out["messages"][-1].content == "D-4 is shipped."


def test_an_approval_in_the_remote_agent_is_answered_with_command_resume(remote: RemoteGraph) -> None:
    config = {"configurable": {"thread_id": "remote-2"}}
    waiting = remote.invoke({"messages": [HumanMessage("refund R-1")]}, config)
    (interrupt,) = waiting["__interrupt__"]
    assert interrupt["value"]["action_requests"][0]["args"] == {"order_id": "R-1"}
    done = remote.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert done["messages"][-1]["content"] == "Done: refunded R-1."
    assert "__interrupt__" not in done


def test_remote_graph_streams_tokens_as_messages(remote: RemoteGraph) -> None:
    tokens = [
        chunk.get("content")
        for chunk, _ in remote.stream({"messages": [HumanMessage("where is E-5")]}, stream_mode="messages")
        if chunk.get("type") == "AIMessageChunk"
    ]
    assert "".join(tokens) == "Let me look. E-5 is shipped."


def test_remote_graph_reads_the_threads_state_and_history(remote: RemoteGraph) -> None:
    config = {"configurable": {"thread_id": "remote-state"}}
    remote.invoke({"messages": [HumanMessage("where is S-1")]}, config)
    state = remote.get_state(config)  # POST /threads/{id}/state/checkpoint with {"thread_id": ...}
    assert state.values["messages"][-1]["content"] == "S-1 is shipped." and state.next == ()
    history = list(remote.get_state_history(config, limit=3))  # POST /threads/{id}/history with that checkpoint
    assert len(history) == 3 and history[0].config == state.config
    earlier = remote.get_state(history[-1].config)  # one checkpoint of the thread, by its id
    assert earlier.config == history[-1].config and earlier.values == history[-1].values
    assert len(earlier.values["messages"]) < len(state.values["messages"])


def test_the_sdk_reads_a_threads_state_at_one_of_its_checkpoints(url: str) -> None:
    from langgraph_sdk import get_sync_client
    from langgraph_sdk.errors import BadRequestError, NotFoundError

    with get_sync_client(url=url, api_key="alice-key") as client:
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, "support", input={"messages": [{"role": "user", "content": "where is S-2"}]})
        earlier = client.threads.get_history(tid, limit=3)[-1]
        by_id = client.threads.get_state(tid, checkpoint_id=earlier["checkpoint"]["checkpoint_id"])
        by_checkpoint = client.threads.get_state(tid, checkpoint=earlier["checkpoint"])
        assert by_id["values"] == by_checkpoint["values"] == earlier["values"]
        assert by_id["checkpoint"] == earlier["checkpoint"]
        with pytest.raises(NotFoundError):
            client.threads.get_state(tid, checkpoint_id="no-such-checkpoint")
        with pytest.raises(BadRequestError):
            client.threads.get_state(tid, checkpoint={**earlier["checkpoint"], "thread_id": "another-thread"})
        with pytest.raises(BadRequestError):
            client.threads.get_state(tid, checkpoint={**earlier["checkpoint"], "checkpoint_ns": "tools:1"})
