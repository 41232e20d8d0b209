"""Mistakes mypy must reject (tests/agents/test_agent_typing.py asserts each error line)."""

from __future__ import annotations

from typing import assert_type

from pydantic import BaseModel

from ai_utils import ActionRegistry, Agent, DeepAgent
from ai_utils.client import InterruptBatch, InterruptEvent
from ai_utils.testing import FakeChatModel


class Weather(BaseModel):
    celsius: float


model = FakeChatModel(["Sunny."])
assert_type(Agent(llm=model, output=Weather).invoke("hi"), str | InterruptEvent | InterruptBatch)  # not text
assert_type(Agent(llm=model).invoke("hi"), Weather | InterruptEvent | InterruptBatch)  # no output: text
Agent(llm=model).invoke("hi").celsius  # noqa: B018 - a text answer has no fields
Agent(llm=model, output=Weather, actions=ActionRegistry([]))  # directives read text: not with output
assert_type(DeepAgent(llm=model, output=Weather).invoke("hi", thread_id="t"), Weather)  # maybe an interrupt
DeepAgent(llm=model, permissions=["/workspace/"])  # permissions are FilesystemPermission rules
DeepAgent(llm=model, subagents=[{"name": "researcher"}])  # a subagent needs its description and prompt
Agent(llm=model, temprature=0.2)  # a misspelt option: the collapsed overloads keep every option's name
Agent(llm=model).invoke("hi", thred_id="t")  # so do the run options
DeepAgent(llm=model).stream("hi", show_tool_calls="yes")  # and their types
Agent(llm=model, output=Weather, max_iterations="3")  # an Agent-only option, typed in AgentOptions
