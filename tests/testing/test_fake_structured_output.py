from __future__ import annotations

from typing import Any

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage
from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict

from ai_utils.exceptions import UserError
from ai_utils.testing import FakeChatModel, FunctionChatModel


class Weather(BaseModel):
    city: str
    celsius: int


class WeatherDict(TypedDict):
    city: str
    celsius: int


WEATHER_SCHEMA: dict[str, Any] = {
    "title": "weather",
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
    "required": ["city", "celsius"],
}


def test_json_content_is_validated_into_a_pydantic_model() -> None:
    model = FakeChatModel(['{"city": "Paris", "celsius": 21}'])

    assert model.with_structured_output(Weather).invoke("weather?") == Weather(city="Paris", celsius=21)


def test_json_inside_a_markdown_fence_is_accepted() -> None:
    model = FakeChatModel(['```json\n{"city": "Rome", "celsius": 30}\n```'])

    assert model.with_structured_output(Weather).invoke("weather?") == Weather(city="Rome", celsius=30)


def test_a_tool_call_named_after_the_schema_is_accepted() -> None:
    reply = {"tool_calls": [{"name": "other", "args": {}}, {"name": "Weather", "args": {"city": "Oslo", "celsius": 3}}]}
    model = FakeChatModel([reply])

    assert model.with_structured_output(Weather).invoke("weather?") == Weather(city="Oslo", celsius=3)


def test_any_tool_call_whose_args_fit_is_accepted() -> None:
    model = FakeChatModel([{"tool_calls": [{"name": "whatever", "args": {"city": "Oslo", "celsius": 3}}]}])

    assert model.with_structured_output(Weather).invoke("weather?") == Weather(city="Oslo", celsius=3)


def test_typed_dict_schemas_give_validated_dicts() -> None:
    model = FakeChatModel(['{"city": "Paris", "celsius": "21"}', '{"city": "Paris"}'])
    structured = model.with_structured_output(WeatherDict)

    assert structured.invoke("a") == {"city": "Paris", "celsius": 21}
    with pytest.raises(ValidationError):
        structured.invoke("b")


def test_json_schema_dicts_give_dicts_and_check_required_keys() -> None:
    model = FakeChatModel(['{"city": "Paris", "celsius": 21}', '{"city": "Paris"}', "[1, 2]"])
    structured = model.with_structured_output(WEATHER_SCHEMA)

    assert structured.invoke("a") == {"city": "Paris", "celsius": 21}
    with pytest.raises(OutputParserException, match=r"misses required keys \['celsius'\]"):
        structured.invoke("b")
    with pytest.raises(OutputParserException, match="Expected a JSON object"):
        structured.invoke("c")


def test_openai_tool_dict_schemas_are_unwrapped() -> None:
    tool_schema = {"type": "function", "function": {"name": "weather", "parameters": WEATHER_SCHEMA}}
    model = FakeChatModel(['{"city": "Paris"}'])

    with pytest.raises(OutputParserException, match="misses required keys"):
        model.with_structured_output(tool_schema).invoke("a")


def test_untitled_json_schema_is_refused_like_langchain_does() -> None:
    with pytest.raises(ValueError, match="top-level 'title'"):
        FakeChatModel(["{}"]).with_structured_output({"type": "object"})


def test_invalid_json_raises_without_include_raw() -> None:
    model = FakeChatModel(["not json"])

    with pytest.raises(OutputParserException, match="Expected a JSON reply for Weather, got 'not json'"):
        model.with_structured_output(Weather).invoke("weather?")


def test_schema_mismatch_raises_a_validation_error_without_include_raw() -> None:
    model = FakeChatModel(['{"city": "Paris", "celsius": "warm"}'])

    with pytest.raises(ValidationError, match="celsius"):
        model.with_structured_output(Weather).invoke("weather?")


def test_include_raw_returns_raw_parsed_and_no_error_on_success() -> None:
    model = FakeChatModel(['{"city": "Paris", "celsius": 21}'])

    result = model.with_structured_output(Weather, include_raw=True).invoke("weather?")

    assert isinstance(result, dict)
    assert isinstance(result["raw"], AIMessage)
    assert result["raw"].content == '{"city": "Paris", "celsius": 21}'
    assert result["parsed"] == Weather(city="Paris", celsius=21)
    assert result["parsing_error"] is None


def test_include_raw_captures_invalid_json_as_parsing_error() -> None:
    model = FakeChatModel(["I think it is sunny"])

    result = model.with_structured_output(Weather, include_raw=True).invoke("weather?")

    assert isinstance(result, dict)
    assert result["parsed"] is None
    assert isinstance(result["parsing_error"], OutputParserException)
    assert result["raw"].content == "I think it is sunny"


def test_include_raw_captures_validation_errors_so_callers_can_retry() -> None:
    model = FakeChatModel(['{"city": "Paris"}', '{"city": "Paris", "celsius": 21}'])
    structured = model.with_structured_output(Weather, include_raw=True)

    first = structured.invoke("weather?")
    second = structured.invoke(f"Fix this error: {first['parsing_error']}")  # type: ignore[index]

    assert isinstance(first["parsing_error"], ValidationError)  # type: ignore[index]
    assert second["parsed"] == Weather(city="Paris", celsius=21)  # type: ignore[index]
    assert "celsius" in model.calls[1][0].text


@pytest.mark.parametrize("method", ["function_calling", "json_mode", "json_schema"])
def test_every_method_parses_the_same_way(method: Any) -> None:
    model = FakeChatModel(['{"city": "Paris", "celsius": 21}'])

    assert model.with_structured_output(Weather, method=method, strict=True).invoke("a") == Weather(
        city="Paris", celsius=21
    )


def test_unknown_method_or_extra_arguments_are_refused() -> None:
    model = FakeChatModel(["{}"])

    with pytest.raises(UserError, match="Unknown structured-output method 'magic'"):
        model.with_structured_output(Weather, method="magic")  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"unsupported arguments \['temperature'\]"):
        model.with_structured_output(Weather, temperature=0)


def test_the_schema_is_bound_as_a_tool_the_function_model_can_see() -> None:
    seen: list[list[str]] = []

    def reply(messages: list[Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append([t["function"]["name"] for t in tools])
        return {"tool_calls": [{"name": "Weather", "args": {"city": "Lima", "celsius": 19}}]}

    structured = FunctionChatModel(reply).with_structured_output(Weather)

    assert structured.invoke("weather?") == Weather(city="Lima", celsius=19)
    assert seen == [["Weather"]]


async def test_structured_output_works_async_and_streaming() -> None:
    model = FakeChatModel(['{"city": "Paris", "celsius": 21}', '{"city": "Bern", "celsius": 9}'])
    structured = model.with_structured_output(Weather)

    assert await structured.ainvoke("a") == Weather(city="Paris", celsius=21)
    assert [item async for item in structured.astream("b")] == [Weather(city="Bern", celsius=9)]


def test_non_object_json_schemas_pass_the_data_through() -> None:
    schema = {"title": "numbers", "type": "array", "items": {"type": "integer"}}

    assert FakeChatModel(["[1, 2, 3]"]).with_structured_output(schema).invoke("a") == [1, 2, 3]
