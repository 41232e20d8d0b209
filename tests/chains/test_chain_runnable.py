"""`Chain` is a LangChain `Runnable`: prompt templates pipe into it, its text into parsers; one chain run per call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable
from pydantic import BaseModel

from ai_utils import Chain, UserError
from ai_utils.testing import FakeChatModel, FunctionChatModel

PROMPT = ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "Summarise: {text}")])


class Brief(BaseModel):
    title: str


def test_a_prompt_template_pipes_its_messages_into_a_chain_after_the_chain_prompt() -> None:
    model = FakeChatModel(["A short summary."])
    chain = Chain(llm=model, prompt="You summarise support tickets.")

    assert isinstance(chain, Runnable)
    assert (PROMPT | chain).invoke({"text": "the printer is on fire"}) == "A short summary."
    sent = model.calls[0]
    assert isinstance(sent[0], SystemMessage)
    assert sent[0].text == "You summarise support tickets.\n\nBe brief."  # one system message, ours first
    assert isinstance(sent[1], HumanMessage) and sent[1].text == "Summarise: the printer is on fire"
    assert len(sent) == 2


def test_a_typed_chain_validates_what_the_piped_prompt_asked_for() -> None:
    model = FakeChatModel(['{"title": "Printer fire"}'])
    chain = PROMPT | Chain(llm=model, output=Brief)

    assert chain.invoke({"text": "the printer is on fire"}) == Brief(title="Printer fire")
    assert "title" in model.calls[0][0].text  # the schema instructions went into the system message


def test_chain_text_pipes_into_a_parser_and_streams_through_it() -> None:
    chain = Chain(llm=FakeChatModel(["one two three"] * 2), prompt="Count.") | StrOutputParser()

    assert chain.invoke({"n": 3}) == "one two three"
    assert "".join(chain.stream({"n": 3})) == "one two three"


def test_a_template_prompt_needs_named_inputs_not_a_prompt_value() -> None:
    chain = Chain(llm=FakeChatModel(["x"]), prompt="Translate {text}.")

    with pytest.raises(UserError, match=r"template \(it names 'text'\).*needs named inputs"):
        (PROMPT | chain).invoke({"text": "hi"})
    with pytest.raises(UserError, match="must be a mapping"):
        chain.invoke("plain text")  # type: ignore[arg-type]


def test_batch_and_with_retry_run_the_chain_again() -> None:
    calls = {"n": 0}

    def flaky(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("provider unreachable")
        return f"answer {calls['n']}"

    chain = Chain(llm=FunctionChatModel(flaky), prompt="Answer.")

    assert chain.with_retry(stop_after_attempt=2, wait_exponential_jitter=False).invoke({"q": "x"}) == "answer 2"
    assert sorted(chain.batch([{"q": "a"}, {"q": "b"}])) == ["answer 3", "answer 4"]


async def test_astream_events_show_one_chain_run_around_the_model_call() -> None:
    chain = Chain(llm=FakeChatModel(["streamed answer"]), prompt="Answer.")

    events = [e async for e in chain.astream_events({"q": "x"}, version="v2")]

    assert (events[0]["event"], events[0]["name"]) == ("on_chain_start", "Chain")
    assert (events[-1]["event"], events[-1]["name"]) == ("on_chain_end", "Chain")
    assert events[-1]["data"]["output"] == "streamed answer"
    model_start = next(e for e in events if e["event"] == "on_chat_model_start")
    assert events[0]["run_id"] in model_start["parent_ids"]
    chunks = [e["data"]["chunk"] for e in events if e["event"] == "on_chain_stream"]
    assert "".join(chunks) == "streamed answer"


async def test_a_sync_chain_call_inside_a_running_loop_warns_once() -> None:
    chain = Chain(llm=FakeChatModel(["ok"] * 3), prompt="Answer.")

    with pytest.warns(RuntimeWarning, match=r"Chain\.invoke\(\).*await Chain\.ainvoke") as seen:
        chain.invoke({"q": "x"})
    assert len(seen) == 1
    assert await chain.ainvoke({"q": "x"}) == "ok"
    assert await asyncio.to_thread(chain.invoke, {"q": "x"}) == "ok"


def test_unknown_options_are_refused() -> None:
    with pytest.raises(UserError, match="unknown argument") as refused:
        Chain(llm=FakeChatModel(["x"])).invoke({"q": "x"}, thread_id="t")
    assert str(refused.value) == (
        "Chain.invoke got unknown argument(s) thread_id=. A Chain takes its inputs and a `config` only."
    )  # a Chain takes no options: no empty "Known: ." list


def test_a_config_that_is_no_mapping_is_a_user_error() -> None:
    with pytest.raises(UserError, match=r"Chain: `config` must be a LangChain RunnableConfig mapping"):
        Chain(llm=FakeChatModel(["x"])).invoke({"q": "x"}, "t-1")  # type: ignore[arg-type]  # was an AttributeError
