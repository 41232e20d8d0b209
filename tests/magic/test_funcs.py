from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from ai_utils.exceptions import ModelOutputError, UserError
from ai_utils.magic import (
    aextract,
    arewrite,
    astructure,
    asummarize,
    extract,
    rewrite,
    structure,
    summarize,
)
from ai_utils.testing import FakeChatModel, FunctionChatModel


class Person(BaseModel):
    name: str
    age: int
    city: str


class Invoice(BaseModel):
    customer: str
    total_eur: float
    items: list[str]


MAX = {"name": "Max", "age": 30, "city": "Berlin"}


def test_extract_returns_the_schema_instance_and_sends_data_and_goal() -> None:
    llm = FakeChatModel([json.dumps(MAX)])

    person = extract("Max ist 30 und lebt in Berlin.", Person, goal="the main person", llm=llm)

    assert person == Person(**MAX)
    system, human = llm.calls[0]
    assert "Goal: the main person" in system.content and "`Person`" in system.content
    assert human.content == "Max ist 30 und lebt in Berlin."


def test_extract_accepts_json_serialisable_data() -> None:
    llm = FakeChatModel([json.dumps(MAX)])

    extract({"profile": {"first": "Max", "years": 30, "town": "Berlin"}}, Person, llm=llm)

    assert json.loads(llm.calls[0][1].content) == {"profile": {"first": "Max", "years": 30, "town": "Berlin"}}


def test_extract_retries_twice_then_raises() -> None:
    llm = FakeChatModel(["?", "??", "???", json.dumps(MAX)])

    with pytest.raises(ModelOutputError) as caught:
        extract("Max", Person, llm=llm)

    assert caught.value.attempts == 3
    assert len(llm.calls) == 3


def test_extract_rejects_a_schema_that_is_not_a_pydantic_class() -> None:
    with pytest.raises(UserError, match="extract\\(schema=...\\) must be a pydantic model class"):
        extract("x", {"name": str}, llm=FakeChatModel([]))  # type: ignore[arg-type]


def test_structure_with_retries_one_makes_at_most_two_model_calls() -> None:
    llm = FakeChatModel(['{"customer": "ACME"}', '{"customer": "ACME"}', "unused"])

    with pytest.raises(ModelOutputError) as caught:
        structure("ACME bought 2 chairs for 99.5 EUR", Invoice, retries=1, llm=llm)

    assert len(llm.calls) == 2
    assert caught.value.attempts == 2
    assert "total_eur" in caught.value.errors


def test_structure_feeds_the_error_back_and_returns_the_fixed_instance() -> None:
    good = {"customer": "ACME", "total_eur": 99.5, "items": ["chair", "chair"]}
    llm = FakeChatModel(['{"customer": "ACME", "total_eur": "lots", "items": []}', json.dumps(good)])

    assert structure("ACME bought 2 chairs for 99.5 EUR", Invoice, llm=llm) == Invoice(**good)
    assert "total_eur" in llm.calls[1][-1].content


def test_rewrite_returns_the_stripped_text_following_the_instruction() -> None:
    llm = FakeChatModel(["  Sehr geehrte Damen und Herren, bitte senden Sie die Rechnung.  "])

    text = rewrite("hey, schick mal die rechnung", "Formuliere als kurze professionelle E-Mail.", llm=llm)

    assert text == "Sehr geehrte Damen und Herren, bitte senden Sie die Rechnung."
    system, human = llm.calls[0]
    assert "Instruction: Formuliere als kurze professionelle E-Mail." in system.content
    assert human.content == "hey, schick mal die rechnung"


def test_rewrite_retries_an_empty_reply_and_counts_retries_as_extra_attempts() -> None:
    llm = FakeChatModel(["   ", "Done."])

    assert rewrite("x", "Improve.", retries=1, llm=llm) == "Done."
    assert "empty" in llm.calls[1][-1].content

    empty = FakeChatModel(["", " ", "\n"])
    with pytest.raises(ModelOutputError) as caught:
        rewrite("x", "Improve.", retries=2, llm=empty)
    assert caught.value.attempts == 3 and len(empty.calls) == 3
    assert "rewrite()" in str(caught.value)


def test_rewrite_needs_an_instruction() -> None:
    with pytest.raises(UserError, match="non-empty instruction"):
        rewrite("x", "  ", llm=FakeChatModel([]))


def test_summarize_sends_focus_and_word_limit() -> None:
    llm = FakeChatModel(["Short summary."])

    assert summarize("long text " * 50, focus="costs", max_words=5, llm=llm) == "Short summary."
    system = llm.calls[0][0].content
    assert "Focus on: costs" in system and "at most 5 words" in system


def test_summarize_sends_an_over_long_summary_back_once_with_its_word_count() -> None:
    llm = FakeChatModel(["one two three four five six", "one two three"])

    assert summarize("text", max_words=4, llm=llm) == "one two three"
    assert "6 words but must have at most 4" in llm.calls[1][-1].content


def test_summarize_cuts_a_still_too_long_second_reply_to_max_words() -> None:
    llm = FakeChatModel(["a b c d e f", "a b c d e", "unused"])

    assert summarize("text", max_words=3, llm=llm) == "a b c"
    assert len(llm.calls) == 2


def test_summarize_without_a_limit_keeps_long_text_and_fails_on_two_empty_replies() -> None:
    assert summarize({"k": "v"}, llm=FakeChatModel(["word " * 500])) == ("word " * 500).strip()

    with pytest.raises(ModelOutputError) as caught:
        summarize("text", llm=FakeChatModel(["", ""]))
    assert caught.value.attempts == 2


def test_summarize_rejects_a_bad_word_limit() -> None:
    with pytest.raises(UserError, match="max_words"):
        summarize("text", max_words=0, llm=FakeChatModel([]))


async def test_async_twins_share_the_same_behaviour() -> None:
    assert await aextract("Max", Person, llm=FakeChatModel(["x", json.dumps(MAX)])) == Person(**MAX)
    good = {"customer": "A", "total_eur": 1, "items": []}
    assert await astructure("A paid 1", Invoice, retries=0, llm=FakeChatModel([json.dumps(good)])) == Invoice(**good)
    assert await arewrite("x", "Improve.", llm=FakeChatModel(["", "Better."])) == "Better."
    assert await asummarize("t", max_words=2, llm=FakeChatModel(["a b c", "a b c"])) == "a b"


async def test_async_structure_raises_after_retries() -> None:
    llm = FakeChatModel(["no", "no"])
    with pytest.raises(ModelOutputError):
        await astructure("x", Invoice, retries=1, llm=llm)
    assert len(llm.calls) == 2


def test_a_function_model_sees_the_data_as_the_user_message() -> None:
    def reply(messages: list, tools: list) -> str:
        return messages[-1].content.upper()

    assert rewrite("quiet words", "Shout.", llm=FunctionChatModel(reply)) == "QUIET WORDS"


def test_without_llm_and_without_api_key_the_missing_key_is_named() -> None:
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        summarize("text")
