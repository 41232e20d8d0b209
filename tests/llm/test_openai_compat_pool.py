"""Async calls of one model on one loop share a pooled connection; loops ai_utils runs close their pools."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from conftest import LiveServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ai_utils import get_llm
from ai_utils._utils import run_sync


def completions_app(ports: list[int]) -> Starlette:
    async def complete(request: Request) -> JSONResponse:
        assert request.client is not None
        ports.append(request.client.port)
        body = await request.json()
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    return Starlette(routes=[Route("/v1/chat/completions", complete, methods=["POST"])])


async def test_async_calls_on_one_loop_reuse_one_connection(serve: Callable[[Any], LiveServer]) -> None:
    ports: list[int] = []
    server = serve(completions_app(ports))
    llm = get_llm("openai", "gpt-4o-mini", api_key="sk-test", base_url=f"{server.base_url}/v1")
    for _ in range(3):
        assert (await llm.ainvoke("hello")).content == "hi"
    assert len(ports) == 3 and len(set(ports)) == 1


def test_each_run_sync_loop_gets_its_own_pool_and_closes_it(serve: Callable[[Any], LiveServer]) -> None:
    ports: list[int] = []
    server = serve(completions_app(ports))
    llm = get_llm("openai", "gpt-4o-mini", api_key="sk-test", base_url=f"{server.base_url}/v1")
    for _ in range(2):
        assert run_sync(lambda: llm.ainvoke("hello")).content == "hi"
    gc.collect()  # an unclosed pool would raise ResourceWarning here (warnings are errors in this suite)
    assert len(ports) == 2 and len(set(ports)) == 2
