"""Closing an `Agent.astream` early stops the graph run right away, not when the garbage collector gets to it."""

from __future__ import annotations

import asyncio

from ai_utils import Agent
from ai_utils.testing import FakeChatModel


async def test_closing_an_agent_stream_early_leaves_no_run_tasks_behind() -> None:
    agent = Agent(llm=FakeChatModel([" ".join(["word"] * 50)]))
    stream = agent.astream("hi")
    assert await anext(stream) == "word "

    await stream.aclose()

    assert asyncio.all_tasks() == {asyncio.current_task()}
