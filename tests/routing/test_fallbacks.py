"""get_llm(profile=..., profiles=...) against a real OpenAI-compatible server (aimock over HTTP).

The server answers per model: 503 / 429 / 400 for the failing ones, 200 for the fallback. Its request journal
is the proof of what was tried, in which order, and that a 400 is never retried on another model.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from _services import Aimock, free_port
from langchain_core.tools import tool

from ai_utils import Agent, Gateway, ModelProfiles, Route, get_llm
from ai_utils.client import is_tool_event
from ai_utils.routing._fallback import FallbackChatModel
from ai_utils.testing import MemoryAuditSink


def _error(model: str, status: int, message: str) -> dict[str, Any]:
    return {
        "match": {"model": model},
        "response": {"error": {"message": message, "type": "server_error"}, "status": status},
    }


def _serve(aimock: Aimock) -> None:
    aimock.add(
        _error("primary-model", 503, "upstream overloaded"),
        _error("busy-model", 429, "rate limited"),
        _error("bad-request-model", 400, "invalid parameter"),
        _error("down-model", 500, "internal error"),
        {
            "match": {"model": "fallback-model", "hasToolResult": False, "userMessage": "medication"},
            "response": {"toolCalls": [{"name": "lookup_medication", "arguments": {"name": "ibuprofen"}}]},
        },
        {"match": {"model": "fallback-model", "hasToolResult": True}, "response": {"content": "Take it with food."}},
        {"match": {"model": "fallback-model"}, "response": {"content": "Hello from the fallback."}},
    )


PROFILES = ModelProfiles(
    {
        "fast": "fallback-model",
        "balanced": {"primary": "primary-model", "fallbacks": [{"profile": "fast"}]},
        "busy": {"primary": "busy-model", "fallbacks": ["fallback-model"]},
        "strict": {"primary": "bad-request-model", "fallbacks": ["fallback-model"]},
        "doomed": {"primary": "primary-model", "fallbacks": ["down-model"]},
    }
)


def _log(aimock: Aimock) -> list[tuple[str, int]]:
    """(model, HTTP status) of every chat completion the server answered, in order."""
    out = []
    for entry in aimock.journal():
        body = entry["body"]
        out.append((body["model"], entry["response"]["status"]))
    return out


def test_a_503_falls_back_to_the_next_model_and_the_log_shows_the_order(aimock: Aimock) -> None:
    _serve(aimock)
    llm = get_llm("local", profile="balanced", profiles=PROFILES, base_url=aimock.openai_base_url)
    assert isinstance(llm, FallbackChatModel) and llm.model_ids == ["primary-model", "fallback-model"]

    reply = llm.invoke("hi")

    assert reply.content == "Hello from the fallback."
    assert reply.response_metadata["model_name"] == "fallback-model"  # the model that answered
    assert _log(aimock) == [("primary-model", 503), ("fallback-model", 200)]  # one try each: SDK retries off


def test_a_429_falls_back_too_and_the_next_request_starts_at_the_primary_again(aimock: Aimock) -> None:
    _serve(aimock)
    llm = get_llm("local", profile="busy", profiles=PROFILES, base_url=aimock.openai_base_url)
    assert llm.invoke("one").content == "Hello from the fallback."
    assert llm.invoke("two").content == "Hello from the fallback."
    assert _log(aimock) == [("busy-model", 429), ("fallback-model", 200)] * 2


def test_a_400_is_raised_at_once_and_never_tried_on_another_model(aimock: Aimock) -> None:
    _serve(aimock)
    llm = get_llm("local", profile="strict", profiles=PROFILES, base_url=aimock.openai_base_url)
    with pytest.raises(openai.BadRequestError, match="invalid parameter"):
        llm.invoke("hi")
    assert _log(aimock) == [("bad-request-model", 400)]


def test_when_every_model_fails_the_caller_gets_the_primary_error(aimock: Aimock) -> None:
    _serve(aimock)
    llm = get_llm("local", profile="doomed", profiles=PROFILES, base_url=aimock.openai_base_url)
    with pytest.raises(openai.InternalServerError, match="upstream overloaded"):
        llm.invoke("hi")
    assert _log(aimock) == [("primary-model", 503), ("down-model", 500)]


async def test_stream_and_astream_fall_back_before_the_first_token(aimock: Aimock) -> None:
    _serve(aimock)
    llm = get_llm("local", profile="balanced", profiles=PROFILES, base_url=aimock.openai_base_url)
    assert "".join(str(c.content) for c in llm.stream("hi")) == "Hello from the fallback."
    assert "".join([str(c.content) async for c in llm.astream("hi")]) == "Hello from the fallback."
    assert (await llm.ainvoke("hi")).response_metadata["model_name"] == "fallback-model"
    assert _log(aimock) == [("primary-model", 503), ("fallback-model", 200)] * 3


def test_a_refused_connection_falls_back_to_a_model_of_another_provider(
    aimock: Aimock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _serve(aimock)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")  # nothing listens there
    profiles = ModelProfiles({"cross": {"primary": "openai:gpt-4o-mini", "fallbacks": ["local:fallback-model"]}})
    llm = get_llm("local", profile="cross", profiles=profiles, base_url=aimock.openai_base_url)
    assert llm.invoke("hi").content == "Hello from the fallback."
    assert _log(aimock) == [("fallback-model", 200)]


@tool
def lookup_medication(name: str) -> str:
    """Look up a medication."""
    return f"{name}: take with food"


def test_an_agent_on_a_profile_falls_back_per_model_call_and_the_audit_names_each_model(aimock: Aimock) -> None:
    _serve(aimock)
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", "local", "balanced")], audit=sink, enforce_actor=False)
    llm = get_llm("local", profile="balanced", profiles=PROFILES, base_url=aimock.openai_base_url)
    agent = Agent(llm=llm, tools=[lookup_medication], callbacks=[gateway.callback("support")])

    chunks = list(agent.stream("Which medication?", show_tool_calls=True))

    assert "".join(c for c in chunks if isinstance(c, str)) == "Take it with food."
    assert [c["phase"] for c in chunks if is_tool_event(c)] == ["start", "end"]
    assert _log(aimock) == [("primary-model", 503), ("fallback-model", 200)] * 2
    rows = [(e.model, e.status, e.error_type) for e in sink.entries]
    assert rows == [("primary-model", "failed", "provider"), ("fallback-model", "succeeded", None)] * 2
    assert all(e.tools_requested == ["lookup_medication"] for e in sink.entries)  # tools bound on every model
    bodies = aimock.request_bodies()
    assert all(b["tools"][0]["function"]["name"] == "lookup_medication" for b in bodies)


def test_callbacks_set_on_the_profile_model_reach_every_attempt(aimock: Aimock) -> None:
    _serve(aimock)
    sink = MemoryAuditSink()
    gateway = Gateway(routes=[Route("support", "local", "balanced")], audit=sink, enforce_actor=False)
    llm = get_llm("local", profile="balanced", profiles=PROFILES, base_url=aimock.openai_base_url)
    llm.callbacks = [gateway.callback("support")]
    llm.invoke("hi")
    assert [(e.model, e.status) for e in sink.entries] == [("primary-model", "failed"), ("fallback-model", "succeeded")]


def _slow_provider(log: list[str]) -> Any:
    """An OpenAI-compatible app that takes 2 s for ``slow-model`` and answers every other model at once."""
    import asyncio

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route as HttpRoute

    async def completions(request: Request) -> JSONResponse:
        model = (await request.json())["model"]
        log.append(model)
        if model == "slow-model":
            await asyncio.sleep(2)
        message = {"role": "assistant", "content": f"answered by {model}"}
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4},
            }
        )

    return Starlette(routes=[HttpRoute("/v1/chat/completions", completions, methods=["POST"])])


def test_a_timeout_falls_back_to_the_next_model(serve: Any) -> None:
    log: list[str] = []
    server = serve(_slow_provider(log))
    profiles = ModelProfiles({"quick": {"primary": "slow-model", "fallbacks": ["fallback-model"]}})
    llm = get_llm("local", profile="quick", profiles=profiles, base_url=f"{server.base_url}/v1", timeout=0.3)
    reply = llm.invoke("hi")
    assert (reply.content, reply.response_metadata["model_name"]) == ("answered by fallback-model", "fallback-model")
    assert log == ["slow-model", "fallback-model"]


def test_a_gateway_route_can_name_a_profile_and_gateway_llm_falls_back(aimock: Aimock) -> None:
    _serve(aimock)
    sink = MemoryAuditSink()
    options = {"profile": "balanced", "profiles": PROFILES, "base_url": aimock.openai_base_url}
    gateway = Gateway(routes=[Route("support", "local", "balanced", options)], audit=sink, enforce_actor=False)
    reply = gateway.llm("support").invoke("hi")
    assert reply.content == "Hello from the fallback."
    assert [(e.feature, e.model, e.status) for e in sink.entries] == [
        ("support", "primary-model", "failed"),
        ("support", "fallback-model", "succeeded"),
    ]


def test_a_local_server_that_is_down_falls_back_too(aimock: Aimock, monkeypatch: pytest.MonkeyPatch) -> None:
    _serve(aimock)
    monkeypatch.setenv("LOCAL_LLM_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")  # no Ollama running
    profiles = ModelProfiles({"home-first": {"primary": "local:llama3.2:3b", "fallbacks": ["fallback-model"]}})
    llm = get_llm("openai", profile="home-first", profiles=profiles, api_key="sk-test", base_url=aimock.openai_base_url)
    assert llm.invoke("hi").content == "Hello from the fallback."
    assert _log(aimock) == [("fallback-model", 200)]
