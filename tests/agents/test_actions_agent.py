"""`Agent(actions=registry)`: the gateway seed's createAgent/respond on a real graph.

The model is told which actions the actor may propose and how; the stream never shows a directive line (not even
split over tokens) but carries each validated action and follow-up as its own chunk; `invoke` returns a
`DirectiveResult` with the run's trace id, model and usage.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage
from pydantic import BaseModel

from ai_utils import (
    ActionRegistry,
    Agent,
    FakeChatModel,
    UserError,
    define_action,
    is_action_event,
    is_follow_up_event,
    memory_sessions,
)
from ai_utils.tools.durable import durable_tool


class Refund(BaseModel):
    """Refund params."""

    order: str


def registry(**options: Any) -> ActionRegistry:
    return ActionRegistry(
        [
            define_action(id="ticket.summarize", description="Summarize a ticket.", risk="safe"),
            define_action(
                id="refund", description="Refund an order.", risk="confirm", availability="pro", schema=Refund
            ),
            define_action(id="user.delete", description="Delete a user.", risk="confirm", availability="admin"),
            define_action(id="db.drop", description="Drop the database.", risk="restricted"),
        ],
        **options,
    )


REPLY = (
    "Ich kümmere mich darum.\n"
    "Der Status kommt gleich.\n"
    '!> ticket.summarize {"id": "T-1"}\n'
    '  !> refund {"order": "A1"}\n'
    "?> Soll ich eine Antwort entwerfen?\n"
    "?> Status prüfen"
)
VISIBLE = "Ich kümmere mich darum.\nDer Status kommt gleich."


class CharStreamModel(FakeChatModel):
    """FakeChatModel whose stream sends every character as its own token, so `!>` arrives as "!" then ">"."""

    def _message_chunks(
        self, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any]
    ) -> Iterator[AIMessageChunk]:
        message = self._message(messages, stop, kwargs)
        for char in message.text:
            yield AIMessageChunk(content=char, id=message.id)
        for index, call in enumerate(message.tool_calls):
            chunk: Any = {"name": call["name"], "args": str(call["args"]).replace("'", '"'), "id": call["id"]}
            yield AIMessageChunk(content="", tool_call_chunks=[{**chunk, "index": index}], id=message.id)
        yield AIMessageChunk(
            content="",
            usage_metadata=message.usage_metadata,
            response_metadata=message.response_metadata,
            id=message.id,
        )


def system_text(messages: list[BaseMessage]) -> str:
    return messages[0].text if isinstance(messages[0], SystemMessage) else ""


def test_the_system_prompt_lists_the_actions_the_actor_may_propose_and_the_syntax() -> None:
    llm = FakeChatModel(["ok", "ok", "ok"])
    agent = Agent(llm=llm, prompt="Du bist der Support.", actions=registry())
    agent.invoke("hi", actor={"user_id": "u1"})
    agent.invoke("hi", actor={"user_id": "u2", "plan": "pro"})
    agent.invoke("hi", actor={"user_id": "u3", "roles": ["admin"]})
    free, pro, admin = (system_text(call) for call in llm.calls)

    assert free.startswith("Du bist der Support.")
    for text in (free, pro, admin):
        assert "!> <id> <json>" in text and "?> <follow-up>" in text and "At most 3 action proposals" in text
        assert "- ticket.summarize: Summarize a ticket." in text
        assert "db.drop" not in text  # restricted: the default policy always blocks it
    assert "refund" not in free and "user.delete" not in free
    assert "- refund: Refund an order." in pro and '"order"' in pro  # with its params' JSON schema
    assert "user.delete" not in pro
    assert "- refund: Refund an order." in admin and "- user.delete: Delete a user." in admin


def test_a_custom_policy_may_open_restricted_actions_so_they_are_listed() -> None:
    llm = FakeChatModel(["ok\n!> db.drop {}"])
    agent = Agent(llm=llm, actions=registry(policy=lambda context: {"status": "allowed"}))
    result = agent.invoke("hi")
    assert "- db.drop: Drop the database." in system_text(llm.calls[0])
    assert [(a.id, a.status) for a in result.actions] == [("db.drop", "allowed")]


@pytest.mark.parametrize("model", [CharStreamModel, FakeChatModel])
def test_no_directive_text_reaches_a_stream_chunk_and_actions_carry_the_registry_status(model: type[Any]) -> None:
    agent = Agent(llm=model([REPLY, REPLY]), actions=registry())
    chunks = list(agent.stream("Geld zurück", actor={"user_id": "u1", "plan": "pro"}))

    texts = [c for c in chunks if isinstance(c, str)]
    assert not any("!>" in t or "?>" in t or t in ("!", "?") for t in texts), texts
    assert "".join(texts) == VISIBLE
    assert [c for c in chunks if is_action_event(c)] == [
        {"kind": "action", "id": "ticket.summarize", "status": "allowed", "params": {"id": "T-1"}},
        {"kind": "action", "id": "refund", "status": "requires_confirmation", "params": {"order": "A1"}},
    ]
    assert [c for c in chunks if is_follow_up_event(c)] == [
        {"kind": "follow_up", "text": "Soll ich eine Antwort entwerfen?"},
        {"kind": "follow_up", "text": "Status prüfen"},
    ]
    assert not isinstance(chunks[-1], str)  # the action chunks come after the reply's text

    free = agent.invoke("Geld zurück", actor={"user_id": "u2"})
    assert free.message == VISIBLE
    assert {a.id: a.status for a in free.actions} == {"ticket.summarize": "allowed", "refund": "blocked"}


def test_directives_in_a_reply_that_calls_a_tool_stay_out_of_the_stream_too() -> None:
    def lookup(term: str) -> str:
        """Look a term up."""
        return f"found {term}"

    first = AIMessage(
        'Ich schaue nach.\n!> ticket.summarize {"id": "T-9"}\n',
        tool_calls=[{"name": "lookup", "args": {"term": "x"}, "id": "c1"}],
    )
    agent = Agent(llm=CharStreamModel([first, "Gefunden.\n?> Noch etwas?"]), tools=[lookup], actions=registry())
    chunks = list(agent.stream("Such", show_tool_calls=True))
    texts = [c for c in chunks if isinstance(c, str)]
    assert "".join(texts) == "Ich schaue nach.Gefunden."
    assert not any(">" in t for t in texts)
    kinds = [c if isinstance(c, str) else c["kind"] for c in chunks]
    assert kinds.index("action") < kinds.index("tool") and kinds[-1] == "follow_up"


def test_max_actions_caps_the_proposals_of_a_turn() -> None:
    reply = "\n".join(["Los."] + [f'!> ticket.summarize {{"id": "T-{i}"}}' for i in range(4)])
    agent = Agent(llm=FakeChatModel([reply, reply, reply]), actions=registry(), max_actions=2)
    result = agent.invoke("alles")
    assert [a.params["id"] for a in result.actions] == ["T-0", "T-1"]
    assert result.parse_errors == [
        "Action 'ticket.summarize' dropped: more than 2 actions proposed",
        "Action 'ticket.summarize' dropped: more than 2 actions proposed",
    ]
    assert len([c for c in agent.stream("alles") if is_action_event(c)]) == 2
    default = Agent(llm=FakeChatModel([reply]), actions=registry())
    assert len(default.invoke("alles").actions) == 3  # the seed's default


def test_max_actions_counts_over_every_reply_of_the_turn() -> None:
    def lookup(term: str) -> str:
        """Look a term up."""
        return "ok"

    first = AIMessage(
        '!> ticket.summarize {"id": "A"}', tool_calls=[{"name": "lookup", "args": {"term": "x"}, "id": "c"}]
    )
    final = 'Fertig.\n!> ticket.summarize {"id": "B"}\n!> ticket.summarize {"id": "C"}'
    agent = Agent(llm=FakeChatModel([first, final]), tools=[lookup], actions=registry(), max_actions=2)
    result = agent.invoke("los")
    assert result.message == "Fertig."
    assert [a.params["id"] for a in result.actions] == ["A", "B"]
    assert len(result.parse_errors) == 1


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_a_bad_max_actions_is_a_user_error(bad: Any) -> None:
    with pytest.raises(UserError, match="max_actions"):
        Agent(llm=FakeChatModel(["x"]), actions=registry(), max_actions=bad)


def test_max_actions_without_actions_is_a_user_error() -> None:
    with pytest.raises(UserError, match="needs `actions="):
        Agent(llm=FakeChatModel(["x"]), max_actions=5)


@dataclass
class Tenant:
    name: str
    api_token: str


def test_a_prompt_function_gets_messages_context_actor_and_metadata() -> None:
    seen: list[dict[str, Any]] = []

    def prompt(input: Any) -> str:
        seen.append(dict(input))
        return f"Du hilfst {input['context'].name} ({input['actor'].user_id}, {input['metadata']['channel']})."

    llm = FakeChatModel(['ok\n!> ticket.summarize {"id": "T"}'])
    agent = Agent(llm=llm, prompt=prompt, actions=registry(), context_schema=Tenant)
    tenant = Tenant("Acme", "tok-secret-123")
    result = agent.invoke("hi", actor={"user_id": "u7"}, context=tenant, config={"metadata": {"channel": "web"}})

    assert set(seen[0]) == {"messages", "context", "actor", "metadata"}
    assert seen[0]["context"] is tenant and seen[0]["metadata"] == {"channel": "web"}
    assert [m.text for m in seen[0]["messages"]] == ["hi"]
    system = system_text(llm.calls[0])
    assert system.startswith("Du hilfst Acme (u7, web).") and "!> <id> <json>" in system
    assert result.actions[0].status == "allowed"


def test_a_prompt_function_works_without_actions_and_must_return_text() -> None:
    llm = FakeChatModel(["ok", "ok"])
    agent = Agent(llm=llm, prompt=lambda input: f"{len(input['messages'])} Nachrichten.")
    assert agent.invoke("hi") == "ok"
    assert system_text(llm.calls[0]) == "1 Nachrichten."
    broken = Agent(llm=FakeChatModel(["ok"]), prompt=lambda input: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(UserError, match="returned NoneType, not a str"):
        broken.invoke("hi")


def test_the_directive_result_has_the_trace_id_model_and_summed_usage() -> None:
    def lookup(term: str) -> str:
        """Look a term up."""
        return "ok"

    call = {"tool_calls": [{"name": "lookup", "args": {"term": "x"}}]}
    llm = FakeChatModel([call, "Fertig.", call, "Fertig."], model="support-model-1")
    agent = Agent(llm=llm, tools=[lookup], actions=registry())
    run_id = uuid.uuid4()
    result = agent.invoke("los", config={"run_id": run_id})
    assert result.trace_id == str(run_id)
    assert result.model == "support-model-1"
    assert result.usage is not None and result.usage["total_tokens"] == (
        result.usage["input_tokens"] + result.usage["output_tokens"]
    )
    assert result.usage["output_tokens"] > 1  # both model calls counted
    other = agent.invoke("los")
    assert re.fullmatch(r"[0-9a-f-]{36}", other.trace_id) and other.trace_id != result.trace_id


def test_the_trace_id_is_the_root_run_of_the_turns_callbacks() -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    class Roots(BaseCallbackHandler):
        def __init__(self) -> None:
            self.roots: list[str] = []

        def on_chain_start(
            self, serialized: Any, inputs: Any, *, run_id: Any, parent_run_id: Any = None, **_: Any
        ) -> None:
            if parent_run_id is None:
                self.roots.append(str(run_id))

    roots = Roots()
    result = Agent(llm=FakeChatModel(["ok"]), actions=registry(), callbacks=[roots]).invoke("hi")
    assert roots.roots == [result.trace_id]


async def test_ainvoke_and_astream_are_the_same() -> None:
    agent = Agent(llm=CharStreamModel([REPLY, REPLY]), actions=registry())
    result = await agent.ainvoke("x", actor={"user_id": "u", "plan": "pro"})
    assert result.message == VISIBLE and [a.status for a in result.actions] == ["allowed", "requires_confirmation"]
    chunks = [c async for c in agent.astream("x", actor={"user_id": "u", "plan": "pro"})]
    assert "".join(c for c in chunks if isinstance(c, str)) == VISIBLE
    assert [c["status"] for c in chunks if is_action_event(c)] == ["allowed", "requires_confirmation"]


def test_a_durable_session_turn_streams_actions_without_directive_lines() -> None:
    def lookup(term: str) -> str:
        """Look a term up."""
        return "ok"

    store = memory_sessions()
    agent = Agent(
        llm=CharStreamModel([REPLY]),
        tools=[durable_tool(lookup, idempotent=True)],
        actions=registry(),
        sessions=store,
    )
    turn = agent.session().prompt("Geld zurück")
    chunks = list(turn)
    assert "".join(c for c in chunks if isinstance(c, str)) == VISIBLE
    assert [c["id"] for c in chunks if is_action_event(c)] == ["ticket.summarize", "refund"]
    # no actor in a session turn: the pro-only refund is blocked by the registry's policy
    assert [c["status"] for c in chunks if is_action_event(c)] == ["allowed", "blocked"]
    assert turn.result().stop_reason == "end_turn"


def test_a_plain_agent_streams_directive_like_text_unchanged() -> None:
    agent = Agent(llm=FakeChatModel(["<?php echo 1; ?>\n?> not a directive here"]))
    assert "".join(c for c in agent.stream("x") if isinstance(c, str)) == "<?php echo 1; ?>\n?> not a directive here"


def test_a_config_that_is_no_mapping_is_refused_as_for_any_agent() -> None:
    agent = Agent(llm=FakeChatModel(["x"]), actions=registry())
    with pytest.raises(UserError, match="RunnableConfig mapping"):
        agent.invoke("hi", config="nope")  # type: ignore[arg-type]


async def test_on_trace_sees_each_proposal_and_its_validation_under_the_runs_one_trace_id() -> None:
    events: list[Any] = []
    agent = Agent(llm=FakeChatModel([REPLY, REPLY]), actions=registry(), on_trace=events.append)
    for result in (
        agent.invoke("x", actor={"user_id": "u", "plan": "free"}),
        await agent.ainvoke("x", actor={"user_id": "u", "plan": "free"}),
    ):
        mine = [e for e in events if e.trace_id == result.trace_id]
        assert [e.type for e in mine][0] == "started" and mine[-1].type == "completed"
        proposed = [e.data for e in mine if e.type == "action.proposed"]
        validated = [e.data for e in mine if e.type == "action.validated"]
        assert [d["id"] for d in proposed] == ["ticket.summarize", "refund"]
        assert [(d["id"], d["status"]) for d in validated] == [("ticket.summarize", "allowed"), ("refund", "blocked")]
        # The params a model proposed are arguments: never in a trace event.
        assert "A1" not in repr([e.data for e in mine])
    assert len({e.trace_id for e in events}) == 2
