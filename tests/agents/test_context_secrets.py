"""A ``context`` that does not fit ``context_schema`` is a `UserError` naming fields, never their values."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, field_validator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from typing_extensions import TypedDict

from ai_utils import Agent, DeepAgent, StreamResponse
from ai_utils.exceptions import UserError
from ai_utils.testing import FakeChatModel

SENTINEL = "SENTINEL-XYZ-123"


class ModelContext(BaseModel):
    api_token: str
    user_id: int

    @field_validator("api_token")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        if len(value) > 40:
            raise ValueError(f"token {value!r} is too long")  # a validator that quotes the value
        return value


@dataclass
class DataContext:
    api_token: str
    user_id: int


class DictContext(TypedDict):
    api_token: str
    user_id: int


def _agent(kind: str, schema: type[Any]) -> Any:
    if kind == "agent":
        return Agent(llm=FakeChatModel(["ok"] * 3), context_schema=schema)
    return DeepAgent(llm=FakeChatModel(["ok"] * 3), context_schema=schema, checkpointer=False)


@pytest.mark.parametrize("kind", ["agent", "deep"])
@pytest.mark.parametrize("schema", [ModelContext, DataContext, DictContext])
async def test_a_context_missing_a_field_names_it_without_values(
    kind: str, schema: type[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    agent = _agent(kind, schema)
    bad = {"api_token": SENTINEL}
    attempts: list[Callable[[], Any]] = [
        lambda: agent.invoke("hi", context=bad),
        lambda: list(agent.stream("hi", context=bad)),
    ]
    for attempt in attempts:  # sync calls off the event loop (a sync run inside it warns)
        with pytest.raises(UserError, match="user_id \\(missing\\)") as caught:
            await asyncio.to_thread(attempt)
        assert SENTINEL not in str(caught.value)
        assert SENTINEL not in repr(caught.value.__cause__) + repr(caught.value.__context__)
    with pytest.raises(UserError, match="user_id") as caught:
        await agent.ainvoke("hi", context=bad)
    assert SENTINEL not in str(caught.value)
    assert SENTINEL not in caplog.text
    # The next call with a good context runs.
    assert await asyncio.to_thread(agent.invoke, "hi", context={"api_token": SENTINEL, "user_id": 7}) == "ok"


def test_an_invalid_value_names_the_field_and_the_error_type_only() -> None:
    agent = _agent("deep", ModelContext)
    with pytest.raises(UserError) as caught:
        agent.invoke("hi", context={"api_token": SENTINEL * 3, "user_id": "not-a-number"})
    message = str(caught.value)
    assert "api_token (value_error)" in message
    assert "user_id (int_parsing)" in message
    assert SENTINEL not in message
    with pytest.raises(UserError, match="must be a ModelContext or a mapping"):
        agent.invoke("hi", context=SENTINEL)


def test_the_ndjson_error_line_never_carries_the_context(serve: Callable[..., Any]) -> None:
    agent = _agent("deep", ModelContext)

    async def endpoint(request: Request) -> StreamResponse:
        async def chunks() -> AsyncIterator[Any]:
            async for chunk in agent.astream("hi", context={"api_token": SENTINEL}):
                yield chunk

        return StreamResponse(chunks())

    server = serve(Starlette(routes=[Route("/run", endpoint)]))
    body = httpx.get(f"{server.base_url}/run", timeout=10).text
    assert body.strip()  # an error line came
    assert "error" in body
    assert SENTINEL not in body
