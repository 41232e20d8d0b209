from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_tests.unit_tests import ToolsUnitTests
from pydantic import BaseModel, Field

from ai_utils.exceptions import UserError
from ai_utils.testing import FakeChatModel
from ai_utils.tools import ToolRegistry


class CityArgs(BaseModel):
    city: str = Field(description="City name")
    unit: str = "celsius"


class NoArgs(BaseModel):
    pass


def get_weather(city: str, unit: str) -> str:
    return f"{city}: sunny ({unit})"


async def get_time() -> str:
    return "2026-01-01T00:00:00Z"


async def forecast(city: str, unit: str) -> dict[str, Any]:
    return {"city": city, "days": [1, 2], "unit": unit}


DEFS = [
    {"name": "get_weather", "description": "Weather for a city", "schema": CityArgs, "func": get_weather},
    {"name": "get_time", "description": "Current time", "schema": NoArgs, "func": get_time},
]


def test_definitions_become_structured_tools_in_definition_order() -> None:
    registry = ToolRegistry(DEFS)

    assert [tool.name for tool in registry.all_tools] == ["get_weather", "get_time"]
    assert registry.names == ["get_weather", "get_time"]
    assert all(isinstance(tool, StructuredTool) for tool in registry.all_tools)
    weather = registry.get_tool("get_weather")
    assert weather.description == "Weather for a city"
    assert weather.args_schema is CityArgs
    assert len(registry) == 2 and "get_time" in registry and "nope" not in registry
    assert repr(registry) == "ToolRegistry(['get_weather', 'get_time'])"


def test_sync_tool_is_called_with_validated_fields_and_defaults_filled_in() -> None:
    tool = ToolRegistry(DEFS).get_tool("get_weather")

    assert tool.invoke({"city": "Paris"}) == "Paris: sunny (celsius)"
    assert tool.invoke({"city": "Oslo", "unit": "kelvin"}) == "Oslo: sunny (kelvin)"


async def test_sync_tool_runs_in_a_worker_thread_when_awaited() -> None:
    seen: list[int] = []

    def where(city: str, unit: str) -> str:
        seen.append(threading.get_ident())
        return city

    tool = ToolRegistry([{"name": "where", "description": "d", "schema": CityArgs, "func": where}]).get_tool("where")

    assert await tool.ainvoke({"city": "Rome"}) == "Rome"
    assert seen and seen[0] != threading.get_ident()


async def test_async_tool_is_awaited_and_non_string_results_are_returned_as_is() -> None:
    registry = ToolRegistry(
        [*DEFS, {"name": "forecast", "description": "Forecast", "schema": CityArgs, "func": forecast}]
    )

    assert await registry.get_tool("get_time").ainvoke({}) == "2026-01-01T00:00:00Z"
    assert await registry.get_tool("forecast").ainvoke({"city": "Bern"}) == {
        "city": "Bern",
        "days": [1, 2],
        "unit": "celsius",
    }


def test_async_tool_also_runs_from_sync_code() -> None:
    assert ToolRegistry(DEFS).get_tool("get_time").invoke({}) == "2026-01-01T00:00:00Z"


async def test_sync_call_of_an_async_tool_inside_a_running_loop_explains_the_fix() -> None:
    with pytest.raises(UserError, match="ainvoke"):
        ToolRegistry(DEFS).get_tool("get_time").invoke({})


def test_invalid_arguments_are_rejected_by_the_schema() -> None:
    with pytest.raises(ValueError, match="city"):
        ToolRegistry(DEFS).get_tool("get_weather").invoke({"unit": "celsius"})


def test_get_tools_returns_tools_in_the_requested_order() -> None:
    registry = ToolRegistry(DEFS)

    assert [t.name for t in registry.get_tools("get_time", "get_weather")] == ["get_time", "get_weather"]


def test_unknown_tool_name_lists_the_known_names() -> None:
    registry = ToolRegistry(DEFS)

    with pytest.raises(UserError, match=r"Unknown tool 'get_wether'\. Known tools: get_weather, get_time\."):
        registry.get_tool("get_wether")
    with pytest.raises(UserError, match="Unknown tool 'x'"):
        registry.get_tools("get_time", "x")
    with pytest.raises(UserError, match=r"\(none\)"):
        ToolRegistry([]).get_tool("x")


def test_definitions_may_be_dataclass_objects() -> None:
    @dataclass
    class ToolDef:
        name: str
        description: str
        schema: type[BaseModel]
        func: Any

    registry = ToolRegistry([ToolDef("get_weather", "Weather", CityArgs, get_weather)])

    assert registry.get_tool("get_weather").invoke({"city": "Rome"}) == "Rome: sunny (celsius)"


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ({**DEFS[0], "name": ""}, "Tool name '' is invalid"),
        ({**DEFS[0], "name": "has space"}, "Tool name 'has space' is invalid"),
        ({**DEFS[0], "description": "  "}, "non-empty description"),
        ({**DEFS[0], "schema": {"city": str}}, "not a pydantic model class"),
        ({**DEFS[0], "func": "get_weather"}, "not callable"),
        ({"name": "x", "description": "d", "schema": NoArgs}, "lacks 'func'"),
        (object(), "lacks 'name'"),
    ],
)
def test_invalid_definitions_are_user_errors(definition: Any, message: str) -> None:
    with pytest.raises(UserError, match=message):
        ToolRegistry([definition])


def test_duplicate_names_are_a_user_error() -> None:
    with pytest.raises(UserError, match="'get_weather' is defined twice"):
        ToolRegistry([DEFS[0], DEFS[0]])


def _agent_script() -> FakeChatModel:
    return FakeChatModel(
        [
            {"tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "call-1"}]},
            {"tool_calls": [{"name": "get_time", "args": {}, "id": "call-2"}]},
            "It is sunny in Paris.",
        ]
    )


def _tool_results(messages: list[Any]) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}


def test_registry_tools_run_inside_a_real_agent_loop() -> None:
    llm = _agent_script()
    agent = create_agent(llm, tools=ToolRegistry(DEFS).all_tools)

    result = agent.invoke({"messages": [("user", "Weather in Paris?")]})

    assert _tool_results(result["messages"]) == {"call-1": "Paris: sunny (celsius)", "call-2": "2026-01-01T00:00:00Z"}
    assert result["messages"][-1].content == "It is sunny in Paris."
    assert len(llm.calls) == 3


async def test_registry_tools_run_inside_an_async_agent_loop() -> None:
    agent = create_agent(_agent_script(), tools=ToolRegistry(DEFS).all_tools)

    result = await agent.ainvoke({"messages": [("user", "Weather in Paris?")]})

    assert _tool_results(result["messages"]) == {"call-1": "Paris: sunny (celsius)", "call-2": "2026-01-01T00:00:00Z"}


class TestSyncRegistryToolStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return ToolRegistry(DEFS).get_tool("get_weather")

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"city": "Paris"}


class TestAsyncRegistryToolStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return ToolRegistry(
            [{"name": "forecast", "description": "Forecast", "schema": CityArgs, "func": forecast}]
        ).get_tool("forecast")

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"city": "Bern", "unit": "kelvin"}
