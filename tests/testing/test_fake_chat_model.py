from __future__ import annotations

import asyncio
import threading
from functools import reduce
from operator import add

import pytest
from dirty_equals import IsStr
from langchain_core.load import dumpd, load
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.tools import tool

from ai_utils.exceptions import UserError
from ai_utils.testing import FakeChatModel, sequence_model, static_model


@tool
def add_numbers(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _merge(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    return reduce(add, chunks)


def test_replies_come_in_script_order() -> None:
    model = FakeChatModel(["first", AIMessage("second"), {"content": "third"}])

    assert [model.invoke("hi").content for _ in range(3)] == ["first", "second", "third"]


def test_responses_can_be_passed_by_keyword() -> None:
    assert FakeChatModel(responses=["ok"]).invoke("hi").content == "ok"


def test_running_out_of_replies_names_the_call_number_and_the_fix() -> None:
    model = FakeChatModel(["a", "b"])
    model.invoke("1")
    model.invoke("2")

    with pytest.raises(UserError, match=r"no reply for call 3 \(2 scripted\).*cycle=True"):
        model.invoke("3")


def test_calls_record_the_messages_of_each_call() -> None:
    model = FakeChatModel(["a", "b"])
    model.invoke([SystemMessage("be brief"), HumanMessage("hi")])
    model.invoke("again")

    assert [[m.text for m in call] for call in model.calls] == [["be brief", "hi"], ["again"]]
    assert isinstance(model.calls[0][0], SystemMessage)


def test_calls_is_a_snapshot_that_callers_cannot_corrupt() -> None:
    model = FakeChatModel(["a"])
    model.invoke("hi")

    model.calls.clear()

    assert len(model.calls) == 1


def test_invoke_reports_small_deterministic_usage() -> None:
    reply = FakeChatModel(["three word answer"]).invoke("two words")

    assert reply.usage_metadata == {"input_tokens": 2, "output_tokens": 3, "total_tokens": 5}
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.response_metadata["model_name"] == "fake-chat-model"


def test_model_name_can_be_set_for_reports() -> None:
    reply = FakeChatModel(["a"], model="gpt-fake").invoke("hi")

    assert reply.response_metadata["model_name"] == "gpt-fake"


def test_tool_call_replies_get_deterministic_ids() -> None:
    model = FakeChatModel(
        [{"tool_calls": [{"name": "add_numbers", "args": {"a": 1, "b": 2}}, {"name": "x", "id": "mine"}]}]
    )

    reply = model.bind_tools([add_numbers]).invoke("add")

    assert reply.tool_calls == [
        {
            "name": "add_numbers",
            "args": {"a": 1, "b": 2},
            "id": IsStr(regex=r"call_1_0_[0-9a-f]{8}"),
            "type": "tool_call",
        },
        {"name": "x", "args": {}, "id": "mine", "type": "tool_call"},
    ]
    assert reply.response_metadata["finish_reason"] == "tool_calls"


def test_ai_message_replies_without_tool_call_ids_get_ids_and_the_script_is_untouched() -> None:
    scripted = AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": None}])
    model = FakeChatModel([scripted])

    reply = model.invoke("go")

    assert reply.tool_calls[0]["id"] == IsStr(regex=r"call_1_0_[0-9a-f]{8}")
    assert scripted.tool_calls[0]["id"] is None


def test_bound_tools_reach_the_model_as_openai_tool_dicts() -> None:
    model = FakeChatModel(["ok"])
    bound = model.bind_tools([add_numbers], tool_choice="any")

    assert bound.kwargs["tools"][0]["function"]["name"] == "add_numbers"  # type: ignore[attr-defined]
    assert bound.kwargs["tool_choice"] == "any"  # type: ignore[attr-defined]
    assert bound.invoke("hi").content == "ok"


def test_streamed_text_chunks_join_to_the_content() -> None:
    text = "  Hello there,\nfriendly   world! "
    model = FakeChatModel([text, text])

    chunks = list(model.stream("hi"))

    assert len([c for c in chunks if c.content]) > 3
    assert "".join(str(c.content) for c in chunks) == text
    assert _merge(chunks).content == model.invoke("hi").content


def test_streamed_tool_call_chunks_merge_into_complete_tool_calls() -> None:
    reply = {"content": "Let me add.", "tool_calls": [{"name": "add_numbers", "args": {"a": 1, "b": 2}}, {"name": "x"}]}
    chunks = list(FakeChatModel([reply]).bind_tools([add_numbers]).stream("add"))
    merged = _merge(chunks)
    invoked = FakeChatModel([reply]).invoke("add")

    assert sum(1 for c in chunks if c.tool_call_chunks) >= 3
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [(c["name"], c["args"]) for c in invoked.tool_calls]
    assert merged.tool_calls[0] == {
        "name": "add_numbers",
        "args": {"a": 1, "b": 2},
        "id": IsStr(regex=r"call_1_0_[0-9a-f]{8}"),
        "type": "tool_call",
    }
    assert merged.tool_calls[0]["id"] != invoked.tool_calls[0]["id"]  # two model instances never share an id
    assert merged.content == invoked.content == "Let me add."


def test_stream_and_invoke_give_the_same_usage_and_metadata() -> None:
    reply = {"content": "a b c", "reasoning": "think hard", "tool_calls": [{"name": "f", "args": {"q": "x"}}]}
    model = FakeChatModel([reply, reply])

    merged = _merge(list(model.stream("one two")))
    invoked = model.invoke("one two")

    assert merged.usage_metadata == invoked.usage_metadata
    assert invoked.usage_metadata is not None and invoked.usage_metadata["output_tokens"] > 0
    assert merged.response_metadata == invoked.response_metadata
    assert merged.additional_kwargs == invoked.additional_kwargs
    assert merged.chunk_position == "last"


def test_reasoning_is_a_reasoning_block_and_stays_out_of_the_text() -> None:
    model = FakeChatModel([{"content": "The answer is 42.", "reasoning": "Let me think step by step."}] * 2)

    chunks = list(model.stream("think"))
    merged = _merge(chunks)
    invoked = model.invoke("think")

    assert merged.text == invoked.text == "The answer is 42."
    assert merged.content_blocks[0] == {"type": "reasoning", "reasoning": "Let me think step by step."}
    assert invoked.content_blocks[0] == {"type": "reasoning", "reasoning": "Let me think step by step."}
    first_block = chunks[0].content_blocks[0]
    assert first_block["type"] == "reasoning"


def test_an_empty_reply_still_streams_one_chunk() -> None:
    chunks = list(FakeChatModel([""]).stream("hi"))

    assert len(chunks) == 1
    assert chunks[0].content == ""


def test_list_content_is_streamed_as_one_piece() -> None:
    blocks = [{"type": "text", "text": "hello"}]
    model = FakeChatModel([AIMessage(content=blocks)])  # type: ignore[arg-type]

    merged = _merge(list(model.stream("hi")))

    assert merged.text == "hello"


def test_extra_additional_kwargs_survive_streaming() -> None:
    model = FakeChatModel([AIMessage(content="x", additional_kwargs={"refusal": None, "custom": "v"})])

    merged = _merge(list(model.stream("hi")))

    assert merged.additional_kwargs == {"refusal": None, "custom": "v"}


def test_streaming_flag_routes_invoke_through_the_stream_path() -> None:
    model = FakeChatModel(["a b"], streaming=True)

    assert model.invoke("hi").content == "a b"
    assert len(model.calls) == 1


async def test_ainvoke_and_astream_use_the_same_script() -> None:
    model = FakeChatModel(["first reply", {"content": "second reply", "reasoning": "why"}])

    first = await model.ainvoke("hi")
    chunks = [chunk async for chunk in model.astream("again")]

    assert first.content == "first reply"
    assert "".join(str(c.content) for c in chunks) == "second reply"
    assert _merge(chunks).additional_kwargs == {"reasoning_content": "why"}
    assert [[m.text for m in call] for call in model.calls] == [["hi"], ["again"]]


async def test_astream_yields_control_between_chunks() -> None:
    model = FakeChatModel(["one two three four"])
    seen: list[str] = []

    async def consume() -> None:
        async for chunk in model.astream("hi"):
            seen.append(str(chunk.content))

    async def observe() -> int:
        while not seen:
            await asyncio.sleep(0)
        return len(seen)

    _, count_when_first_seen = await asyncio.gather(consume(), observe())

    assert count_when_first_seen < 4
    assert "".join(seen) == "one two three four"


async def test_concurrent_async_calls_each_get_one_distinct_reply() -> None:
    model = FakeChatModel([str(i) for i in range(20)])

    replies = await asyncio.gather(*(model.ainvoke(f"q{i}") for i in range(20)))

    assert sorted(int(str(r.content)) for r in replies) == list(range(20))
    assert len(model.calls) == 20


def test_threads_share_the_script_without_losing_or_repeating_replies() -> None:
    model = FakeChatModel([str(i) for i in range(40)])
    results: list[str] = []

    def worker() -> None:
        for _ in range(10):
            results.append(str(model.invoke("hi").content))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results, key=int) == [str(i) for i in range(40)]
    assert len(model.calls) == 40


def test_cycle_repeats_the_script() -> None:
    model = FakeChatModel(["a", "b"], cycle=True)

    assert [model.invoke("x").content for _ in range(5)] == ["a", "b", "a", "b", "a"]


def test_static_model_always_gives_the_same_text() -> None:
    model = static_model("same")

    assert {str(model.invoke(str(i)).content) for i in range(4)} == {"same"}


def test_sequence_model_cycles_through_texts() -> None:
    model = sequence_model(["a", "b", "c"])

    assert [model.invoke("x").content for _ in range(7)] == ["a", "b", "c", "a", "b", "c", "a"]


@pytest.mark.parametrize("texts", [[], "abc"])
def test_sequence_model_rejects_empty_or_string_input(texts: list[str] | str) -> None:
    with pytest.raises(UserError, match="non-empty list"):
        sequence_model(texts)


@pytest.mark.parametrize(
    ("responses", "message"),
    [
        ("just text", "Wrap it in a list"),
        ([42], r"responses\[0\] must be a str, an AIMessage or a mapping"),
        ([{"text": "hi"}], r"unknown keys \['text'\]"),
        ([{"content": 3}], r"\['content'\] must be a str"),
        ([{"reasoning": 3}], r"\['reasoning'\] must be a str"),
        ([{"tool_calls": "f"}], r"\['tool_calls'\] must be a list"),
        (
            ["ok", {"tool_calls": [{"args": {}}]}],
            r"responses\[1\]\['tool_calls'\]\[0\] must be a mapping with a 'name'",
        ),
        ([{"tool_calls": [{"name": "f", "args": [1]}]}], r"\['args'\] must be a mapping"),
    ],
)
def test_bad_scripts_fail_at_construction_with_a_clear_message(responses: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        FakeChatModel(responses)  # type: ignore[arg-type]


def test_llm_type_and_identifying_params_describe_the_fake() -> None:
    model = FakeChatModel(["a", "b"])

    assert model._llm_type == "fake-chat-model"
    assert model._identifying_params == {"model_name": "fake-chat-model", "responses": 2, "cycle": False}
    assert model._get_ls_params()["ls_provider"] == "fake"


@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
def test_fake_chat_model_round_trips_through_load() -> None:
    model = FakeChatModel(["a", {"content": "b", "reasoning": "r"}, AIMessage("c")], temperature=0, model="m")

    revived = load(dumpd(model), valid_namespaces=["ai_utils"], allowed_objects=[FakeChatModel, AIMessage])

    assert isinstance(revived, FakeChatModel)
    assert revived.model_name == "m"
    assert [revived.invoke("x").content for _ in range(3)] == ["a", "b", "c"]


def test_an_ai_message_reply_keeps_its_own_usage_and_metadata() -> None:
    usage = {"input_tokens": 100, "output_tokens": 7, "total_tokens": 107}
    scripted = AIMessage(content="x", usage_metadata=usage, response_metadata={"finish_reason": "length"})  # type: ignore[arg-type]

    reply = FakeChatModel([scripted]).invoke("hi")

    assert reply.usage_metadata == usage
    assert reply.response_metadata == {"model_name": "fake-chat-model", "finish_reason": "length"}


def test_empty_list_content_with_a_tool_call_streams_only_the_tool_call() -> None:
    scripted = AIMessage(content=[], tool_calls=[{"name": "f", "args": {"k": "v"}, "id": "t1"}])

    merged = _merge(list(FakeChatModel([scripted]).stream("hi")))

    assert merged.content == []
    assert merged.tool_calls == [{"name": "f", "args": {"k": "v"}, "id": "t1", "type": "tool_call"}]
