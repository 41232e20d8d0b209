from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils.testing import FakeChatModel


class Outbox:
    """What the send_email tool really sent (a side effect a human approves or not)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []


@pytest.fixture
def outbox() -> Outbox:
    return Outbox()


@pytest.fixture
def tools(outbox: Outbox) -> list[Any]:
    @tool
    def get_weather(city: str) -> str:
        """Return the weather for a city."""
        return f"Sunny in {city}"

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        outbox.sent.append({"to": to, "body": body})
        return f"sent to {to}"

    return [get_weather, send_email]


@pytest.fixture
def make_graph(tools: list[Any]) -> Callable[..., Any]:
    """A real create_agent graph with a scripted model and an in-memory checkpointer."""

    def make(
        replies: list[Any],
        *,
        interrupt_on: dict[str, Any] | None = None,
        mode: str = "batched",
        extra_tools: list[Any] = (),  # type: ignore[assignment]
        name: str | None = None,
    ) -> Any:
        middleware = []
        if interrupt_on:
            middleware.append(HumanInTheLoopMiddleware(interrupt_on=interrupt_on, interrupt_mode=mode))  # type: ignore[arg-type]
        return create_agent(
            FakeChatModel(replies),
            tools=[*tools, *extra_tools],
            middleware=middleware,
            checkpointer=InMemorySaver(),
            name=name,
        )

    return make
