from __future__ import annotations

import json
import pickle

import pytest
from _services import Aimock
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from pydantic import BaseModel, Field

from ai_utils._structured import (
    ainvoke_structured,
    invoke_checked,
    invoke_structured,
    render_data,
    structured_check,
    structured_messages,
)
from ai_utils.exceptions import ModelOutputError, UserError
from ai_utils.llm import get_llm
from ai_utils.testing import FakeChatModel


class Person(BaseModel):
    name: str
    age: int = Field(ge=0)


def _messages() -> list:
    return structured_messages("Extract the person.", "Max is 30.", Person)


def test_valid_json_reply_becomes_a_validated_instance_in_one_call() -> None:
    llm = FakeChatModel(['{"name": "Max", "age": 30}'])

    assert invoke_structured(llm, _messages(), Person) == Person(name="Max", age=30)
    assert len(llm.calls) == 1


def test_the_system_message_names_the_schema_and_carries_its_json_schema() -> None:
    messages = _messages()

    assert messages[0].content.startswith("Extract the person.")
    assert "`Person`" in messages[0].content
    assert json.dumps(Person.model_json_schema()) in messages[0].content
    assert messages[1].content == "Max is 30."


def test_a_tool_call_reply_is_accepted_like_a_providers_function_calling() -> None:
    llm = FakeChatModel([{"tool_calls": [{"name": "Person", "args": {"name": "Ada", "age": 36}}]}])

    assert invoke_structured(llm, _messages(), Person) == Person(name="Ada", age=36)


def test_invalid_reply_is_retried_with_the_validation_error_fed_back() -> None:
    llm = FakeChatModel(['{"name": "Max", "age": -3}', '{"name": "Max", "age": 30}'])

    assert invoke_structured(llm, _messages(), Person, retries=1) == Person(name="Max", age=30)
    assert len(llm.calls) == 2
    feedback = llm.calls[1][-1].content
    assert '{"name": "Max", "age": -3}' in feedback
    assert "greater than or equal to 0" in feedback
    # the retry keeps the original conversation and adds only the feedback
    assert [m.content for m in llm.calls[1][:-1]] == [m.content for m in _messages()]


def test_all_attempts_invalid_raises_model_output_error_with_the_last_error() -> None:
    llm = FakeChatModel(["not json at all", '{"name": "Max"}', '{"age": 3}'])

    with pytest.raises(ModelOutputError) as caught:
        invoke_structured(llm, _messages(), Person, retries=2)

    error = caught.value
    assert error.attempts == 3
    assert len(llm.calls) == 3
    assert "name" in error.errors and "Field required" in error.errors
    assert error.output == '{"age": 3}'
    assert "`Person`" in str(error) and "3 attempt(s)" in str(error)
    assert str(error).rstrip().endswith("or use a stronger model.")
    assert isinstance(pickle.loads(pickle.dumps(error)), ModelOutputError)


def test_retries_zero_means_exactly_one_model_call() -> None:
    llm = FakeChatModel(["nope", '{"name": "Max", "age": 30}'])

    with pytest.raises(ModelOutputError) as caught:
        invoke_structured(llm, _messages(), Person, retries=0)

    assert caught.value.attempts == 1
    assert len(llm.calls) == 1


def test_negative_retries_is_a_user_error() -> None:
    with pytest.raises(UserError, match="retries must be an int >= 0"):
        invoke_structured(FakeChatModel([]), _messages(), Person, retries=-1)


async def test_async_twin_retries_and_validates() -> None:
    llm = FakeChatModel(["{broken", '{"name": "Eve", "age": 5}'])

    assert await ainvoke_structured(llm, _messages(), Person, retries=1) == Person(name="Eve", age=5)
    assert "Invalid JSON" in llm.calls[1][-1].content or "JSON" in llm.calls[1][-1].content


async def test_async_twin_raises_after_the_last_attempt() -> None:
    llm = FakeChatModel(["x", "y"])

    with pytest.raises(ModelOutputError) as caught:
        await ainvoke_structured(llm, _messages(), Person, retries=1)

    assert caught.value.attempts == 2
    assert caught.value.output == "y"


def test_a_model_without_native_structured_output_is_parsed_from_its_text() -> None:
    # GenericFakeChatModel implements no bind_tools, so with_structured_output is unavailable.
    replies = iter([AIMessage("I think it is Max"), AIMessage('```json\n{"name": "Max", "age": 30}\n```')])
    llm = GenericFakeChatModel(messages=replies)

    assert invoke_structured(llm, _messages(), Person, retries=1) == Person(name="Max", age=30)


def test_render_data_keeps_strings_and_dumps_other_values_as_json() -> None:
    assert render_data("plain text") == "plain text"
    assert json.loads(render_data({"a": [1, "ü"]})) == {"a": [1, "ü"]}
    assert "ü" in render_data({"a": "ü"})
    assert json.loads(render_data(Person(name="Max", age=1))) == {"name": "Max", "age": 1}


def _openai(aimock: Aimock) -> BaseChatModel:
    return get_llm("openai", model="gpt-4o-mini", api_key="x", base_url=aimock.openai_base_url)


def test_chat_openai_over_http_sends_a_json_schema_and_retries_an_invalid_reply(aimock: Aimock) -> None:
    aimock.add(
        {"match": {"userMessage": "rejected"}, "response": {"content": json.dumps({"name": "Max", "age": 30})}},
        {"match": {"userMessage": "Max is 30."}, "response": {"content": "not json"}},
    )

    assert invoke_structured(_openai(aimock), _messages(), Person, retries=1) == Person(name="Max", age=30)

    first, second = aimock.request_bodies()
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["name"] == "Person"
    assert "not json" in second["messages"][-1]["content"]


async def test_chat_openai_over_http_exhausted_retries_keep_the_raw_reply(aimock: Aimock) -> None:
    aimock.add({"match": {"userMessage": ""}, "response": {"content": '{"name": "Max"}'}})

    with pytest.raises(ModelOutputError) as caught:
        await ainvoke_structured(_openai(aimock), _messages(), Person, retries=1)

    assert caught.value.attempts == 2
    assert caught.value.output == '{"name": "Max"}'
    assert "Field required" in caught.value.errors
    assert len(aimock.request_bodies()) == 2


def test_a_structured_reply_without_parsed_object_or_error_is_rejected() -> None:
    # What ChatOpenAI's json_schema parser returns when the model answers with a tool call instead.
    def provider(_: object) -> dict[str, object]:
        return {"raw": AIMessage("", tool_calls=[{"name": "other", "args": {}, "id": "1"}]), "parsed": None}

    with pytest.raises(ModelOutputError, match="held no `Person` object") as caught:
        invoke_checked(RunnableLambda(provider), _messages(), structured_check(Person), retries=0, what="w", fix="f")

    assert caught.value.attempts == 1
    assert caught.value.output == ""
