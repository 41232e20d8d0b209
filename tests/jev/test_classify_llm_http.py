"""classify(..., llm=...) on a plain OpenAI-compatible model takes a direct HTTP path; it must act like the model.

Each behaviour is checked on both paths over real HTTP against FakeOpenAIServer: the fast one (``get_llm`` /
``ChatOpenAI`` as configured by users) and the generic one (the same model given its own HTTP clients, so it
sends through the OpenAI SDK, which marks its requests with ``X-Stainless-*`` headers).
"""

from __future__ import annotations

import math
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from langchain_core.rate_limiters import InMemoryRateLimiter
from langchain_core.runnables import RunnableLambda
from langchain_openai import ChatOpenAI

from ai_utils import ClassifyResult, Gateway, MemoryAuditSink, ProviderError, Route, aclassify, classify, get_llm
from ai_utils.gateway.policy import PolicyContext, PolicyDecision
from ai_utils.testing import FakeOpenAIServer

QUESTIONS: dict[str, Any] = {
    "category": {
        "type": "choice",
        "instructions": "Which team should handle `message`?",
        "criteria": {"billing": "Payments or refunds", "technical": "Bugs", "other": None},
    },
    "refund": {"type": "noul", "instructions": "Does `message` explicitly request a refund?"},
    "urgency": {
        "type": "score",
        "instructions": "How urgent is `message`?",
        "criteria": ["Can wait", "Time-sensitive", "Immediately blocking"],
    },
}
STATE = {"message": "I was charged twice this month. Please refund one charge, today!"}


def script(server: FakeOpenAIServer) -> None:
    server.reply(
        "A", logprobs={"A": -0.2, " B": -2.0, "b": -3.0, "Sure": -4.0}, when="Which team", model="fake-gpt-2026-09"
    )
    server.reply("Yes", logprobs={"Yes": -0.1, "No": -2.4, "yes": -3.5}, when="request a refund")
    server.reply("2", logprobs={"2": -0.3, "1": -1.5, "0": -6.0, "**": -7.0}, when="How urgent")


def local(server: FakeOpenAIServer, **options: Any) -> Any:
    return get_llm("local", "fake-gpt", base_url=server.url, api_key=server.api_key, max_retries=0, **options)


_opened: list[httpx.Client | httpx.AsyncClient] = []


def own_clients() -> dict[str, Any]:
    """HTTP clients of the model's own (closed after the test)."""
    clients = {"http_client": httpx.Client(), "http_async_client": httpx.AsyncClient()}
    _opened.extend(clients.values())
    return clients


@pytest.fixture(autouse=True)
async def _close_own_clients() -> AsyncIterator[None]:
    yield
    while _opened:
        client = _opened.pop()
        await client.aclose() if isinstance(client, httpx.AsyncClient) else client.close()


def generic(server: FakeOpenAIServer, **options: Any) -> Any:
    """The same model with HTTP clients of its own: classify must leave the sending to the model and its SDK."""
    return local(server, **own_clients(), **options)


def answers(result: ClassifyResult[Any]) -> dict[str, Any]:
    return {name: answer.model_dump() for name, answer in result.answers.items()}


def via_sdk(server: FakeOpenAIServer) -> list[bool]:
    return ["x-stainless-lang" in request.headers for request in server.requests]


async def test_both_paths_send_the_same_requests_and_read_the_same_answers(openai_server: FakeOpenAIServer) -> None:
    script(openai_server)
    runs: dict[str, tuple[list[ClassifyResult[Any]], list[Any]]] = {}
    for name, make in (("fast", local), ("generic", generic)):
        openai_server.reset()
        script(openai_server)
        results = [
            classify(STATE, QUESTIONS, llm=make(openai_server)),
            await aclassify(STATE, QUESTIONS, llm=make(openai_server)),
        ]
        runs[name] = results, openai_server.requests
        assert via_sdk(openai_server) == [name == "generic"] * 6

    (fast, fast_requests), (slow, slow_requests) = runs["fast"], runs["generic"]
    for ours, theirs in zip(fast, slow, strict=True):
        assert answers(ours) == answers(theirs)
        assert (ours.model, ours.usage, ours.provider) == (theirs.model, theirs.usage, theirs.provider)
    assert fast[0].choices["category"].choice == "billing" and fast[1].scores["urgency"].score > 1.5
    assert sum(fast[1].choices["category"].probabilities.values()) == pytest.approx(1.0)
    assert fast[0].nouls["refund"].noul == pytest.approx(softmax_yes(-0.1, -3.5, -2.4))
    # The very bodies the model's SDK sends (one-token answers with top-20 logprobs), to the same URL, same key.
    key = lambda request: request.text  # noqa: E731 - the three questions arrive in any order
    for ours, theirs in zip(sorted(fast_requests, key=key), sorted(slow_requests, key=key), strict=True):
        assert ours.body == theirs.body
        assert ours.body["logprobs"] is True and ours.body["top_logprobs"] == 20
        assert ours.body["max_completion_tokens"] == 1
        assert ours.path == theirs.path == "/v1/chat/completions"
        assert ours.headers["authorization"] == theirs.headers["authorization"] == f"Bearer {openai_server.api_key}"
        assert ours.headers["content-type"] == "application/json"


def softmax_yes(*yes_then_no: float) -> float:
    yes = math.exp(yes_then_no[0]) + math.exp(yes_then_no[1])
    return yes / (yes + math.exp(yes_then_no[2]))


async def test_openrouter_data_safe_headers_and_options_travel_as_the_model_would_send_them(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reply("Yes", logprobs={"Yes": -0.1, "No": -2.5})
    options: dict[str, Any] = {
        "data_safe": True,
        "temperature": 0.0,
        "default_headers": {"X-OpenRouter-Title": "triage"},
        "api_key": "sk-or-secret",
    }
    question = {"refund": QUESTIONS["refund"]}
    with FakeOpenAIServer(api_key="sk-or-secret") as router:
        router.reply("Yes", logprobs={"Yes": -0.1, "No": -2.5})
        for model in (
            get_llm("openrouter", "openai/gpt-test", base_url=f"{router.url.removesuffix('/v1')}/api/v1", **options),
            get_llm(
                "openrouter",
                "openai/gpt-test",
                base_url=f"{router.url.removesuffix('/v1')}/api/v1",
                **own_clients(),
                **options,
            ),
        ):
            result = await aclassify(STATE, question, llm=model)
            assert result.nouls["refund"].noul > 0.9
            assert result.provider == "openrouter"
        fast, slow = router.requests
    assert "x-stainless-lang" not in fast.headers and "x-stainless-lang" in slow.headers
    assert fast.body == slow.body
    assert fast.body["provider"] == {"data_collection": "deny", "zdr": True}  # OpenRouter's zero-retention routing
    assert fast.body["temperature"] == 0.0 and fast.body["model"] == "openai/gpt-test"
    assert fast.path == "/api/v1/chat/completions"
    assert fast.headers["authorization"] == "Bearer sk-or-secret"
    assert fast.headers["x-openrouter-title"] == "triage"
    assert openai_server.requests == []


class Recorder(BaseCallbackHandler):
    """A plain LangChain handler: what LangSmith-style tracers see of each call."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[LLMResult] = []
        self.errors: list[BaseException] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, **kwargs: Any) -> None:
        self.started.append(kwargs["invocation_params"]["model_name"])

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        self.ended.append(response)

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        self.errors.append(error)


@pytest.mark.parametrize("path", ["fast", "generic"])
async def test_the_gateway_audits_every_question_and_its_policy_still_blocks(
    openai_server: FakeOpenAIServer, path: str
) -> None:
    script(openai_server)
    sink = MemoryAuditSink()
    options = {"base_url": openai_server.url, "api_key": openai_server.api_key, "max_retries": 0}
    if path == "generic":
        options.update(own_clients())
    gateway = Gateway(routes=[Route("triage", "local", "fake-gpt", options)], audit=sink, enforce_actor=False)

    result = await aclassify(STATE, QUESTIONS, llm=gateway.llm("triage", metadata={"ticket": "T-1"}))
    classify(STATE, QUESTIONS, llm=gateway.llm("triage"))

    assert result.choices["category"].choice == "billing"
    assert via_sdk(openai_server) == [path == "generic"] * 6
    assert [entry.status for entry in sink.entries] == ["succeeded"] * 6
    for entry in sink.entries:
        assert (entry.feature, entry.provider, entry.model) == ("triage", "local", "fake-gpt")
        assert entry.usage is not None and entry.usage["output_tokens"] == 1 and entry.usage["input_tokens"] > 0
        assert entry.response_summary in ("A", "Yes", "2")
        assert openai_server.api_key not in str(entry)
    assert sink.entries[0].metadata == {"ticket": "T-1"}
    assert len({entry.request_id for entry in sink.entries}) == 6

    # A handler of the enclosing run (an agent node, a tool) is inherited, and sees the model's name.
    recorder = Recorder()
    plain = local(openai_server) if path == "fast" else generic(openai_server)
    RunnableLambda(lambda state: classify(state, QUESTIONS, llm=plain)).invoke(STATE, {"callbacks": [recorder]})
    assert recorder.started == ["fake-gpt"] * 3
    assert sorted(r.generations[0][0].message.response_metadata["model_name"] for r in recorder.ended) == [
        "fake-gpt",
        "fake-gpt",
        "fake-gpt-2026-09",
    ]

    # The policy runs before the provider call: a denial stops classify with no request sent.
    def deny(context: PolicyContext) -> PolicyDecision:
        return PolicyDecision(rule="closed", allowed=False, reason="Triage is closed today.")

    openai_server.reset()
    closed = Gateway(
        routes=[Route("triage", "local", "fake-gpt", options)], audit=sink, policy=[deny], enforce_actor=False
    )
    with pytest.raises(Exception, match="Triage is closed today"):
        await aclassify(STATE, QUESTIONS, llm=closed.llm("triage"))
    assert openai_server.requests == []
    assert sink.entries[-1].status == "blocked"


@pytest.mark.parametrize("status", [500, 401])
async def test_a_server_error_is_the_models_own_error_on_both_paths(
    openai_server: FakeOpenAIServer, status: int
) -> None:
    errors: dict[str, BaseException] = {}
    recorders: dict[str, Recorder] = {}
    for name, make in (("fast", local), ("generic", generic)):
        openai_server.reset()
        openai_server.fail(status, times=2)  # the fast path's attempt, then the model's own
        recorders[name] = recorder = Recorder()
        with pytest.raises(Exception) as raised:
            await aclassify(STATE, {"refund": QUESTIONS["refund"]}, llm=make(openai_server, callbacks=[recorder]))
        errors[name] = raised.value
        assert len(recorder.errors) == 1 and recorder.errors[0] is raised.value and recorder.ended == []
        with pytest.raises(type(raised.value)):  # sync too
            openai_server.fail(status, times=2)
            classify(STATE, {"refund": QUESTIONS["refund"]}, llm=make(openai_server))

    assert type(errors["fast"]) is type(errors["generic"])
    assert str(errors["fast"]) == str(errors["generic"])
    assert f"Fake failure {status}" in str(errors["fast"])
    assert openai_server.api_key not in str(errors["fast"])


async def test_a_failed_attempt_is_sent_again_by_the_model(openai_server: FakeOpenAIServer) -> None:
    openai_server.fail(503)
    openai_server.reply("No", logprobs={"No": -0.1, "Yes": -2.5})

    result = await aclassify("Thanks, all good!", {"refund": QUESTIONS["refund"]}, llm=local(openai_server))

    assert result.nouls["refund"].noul < 0.2
    assert via_sdk(openai_server) == [False, True]  # our attempt failed; the model's SDK sent the retry
    assert openai_server.requests[0].body == openai_server.requests[1].body


class MyChatOpenAI(ChatOpenAI):
    """A user's subclass may change how requests are sent: classify leaves them to it."""


@pytest.mark.parametrize(
    "make",
    [
        lambda server: MyChatOpenAI(model="fake-gpt", base_url=server.url, api_key=server.api_key),
        lambda server: local(server, rate_limiter=InMemoryRateLimiter(requests_per_second=1000)),
        lambda server: local(server, output_version="v1"),
    ],
    ids=["subclass", "rate-limiter", "v1-content"],
)
async def test_models_outside_the_fast_path_still_classify_through_their_own_transport(
    openai_server: FakeOpenAIServer, make: Any
) -> None:
    openai_server.reply("B", logprobs={"B": -0.1, "A": -2.5}, when="Which team")
    question = {"category": QUESTIONS["category"]}

    result = await aclassify(STATE, question, llm=make(openai_server))
    again = classify(STATE, question, llm=make(openai_server))

    assert result.choices["category"].choice == again.choices["category"].choice == "technical"
    assert via_sdk(openai_server) == [True, True]


async def test_astream_events_around_classify_still_sees_each_model_call(openai_server: FakeOpenAIServer) -> None:
    script(openai_server)

    async def triage(state: dict[str, str]) -> str:
        result = await aclassify(state, QUESTIONS, llm=local(openai_server))
        return str(result.choices["category"].choice)

    events = [event async for event in RunnableLambda(triage).astream_events(STATE, version="v2")]

    assert [e["data"]["output"] for e in events if e["event"] == "on_chain_end"] == ["billing"]
    assert len([e for e in events if e["event"] == "on_chat_model_start"]) == 3
    ends = [e["data"]["output"] for e in events if e["event"] == "on_chat_model_end"]
    assert sorted(message.content for message in ends) == ["2", "A", "Yes"]
    assert via_sdk(openai_server) == [False] * 3


async def test_a_local_server_that_is_not_running_is_named_alike_on_both_paths() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    messages = []
    for options in ({}, own_clients()):
        llm = get_llm("local", "llama3.2:3b", base_url=url, max_retries=0, **options)
        with pytest.raises(ProviderError) as raised:
            await aclassify(STATE, {"refund": QUESTIONS["refund"]}, llm=llm)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
    assert f"No local model server answered at {url}" in messages[0]


_REPLY: dict[str, Any] = {
    "id": "chatcmpl-7",
    "object": "chat.completion",
    "created": 1,
    "model": "fake-gpt-2026-09",
    "system_fingerprint": "fp_1",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "A", "refusal": None, "annotations": []},
            "finish_reason": "length",
            "logprobs": {
                "content": [{"token": "A", "logprob": -0.1, "top_logprobs": [{"token": "A", "logprob": -0.1}]}]
            },
        }
    ],
    "usage": {
        "prompt_tokens": 50,
        "completion_tokens": 1,
        "total_tokens": 51,
        "prompt_tokens_details": {"cached_tokens": 8},
    },
}


def _variants() -> list[dict[str, Any]]:
    choice = _REPLY["choices"][0]
    return [
        _REPLY,
        {**_REPLY, "service_tier": "priority"},
        {key: value for key, value in _REPLY.items() if key not in ("id", "model", "system_fingerprint", "usage")},
        {**_REPLY, "usage": None, "choices": [{**choice, "message": {"role": "assistant", "content": None}}]},
        {**_REPLY, "choices": [{key: value for key, value in choice.items() if key != "logprobs"}]},
    ]


def test_the_plain_reply_is_the_message_the_models_parser_builds() -> None:
    """Without listeners, the usual reply skips the model's parser; the message must be the very same."""
    from ai_utils._compat.langchain_openai import chat_result
    from ai_utils.jev._logprob_http import _plain_reply, _reply

    for llm in (
        get_llm("local", "fake-gpt", base_url="http://127.0.0.1:9/v1", api_key="k"),
        ChatOpenAI(model="fake-gpt", api_key="k", base_url="http://127.0.0.1:9/v1"),  # never contacted
    ):
        for payload in _variants():
            plain = _plain_reply(llm, payload)
            assert plain is not None
            assert plain == _reply(chat_result(llm, payload), None)
        choice = _REPLY["choices"][0]
        for other in (
            {**_REPLY, "error": {"message": "overloaded"}},
            {**_REPLY, "choices": [choice, choice]},
            {**_REPLY, "choices": []},
            {**_REPLY, "choices": [{**choice, "message": {"role": "assistant", "content": "", "tool_calls": [{}]}}]},
            {**_REPLY, "choices": [{**choice, "message": {"role": "assistant", "content": "A", "reasoning": "hm"}}]},
            {**_REPLY, "choices": [{**choice, "message": {"role": "assistant", "content": [{"type": "text"}]}}]},
            [_REPLY],
        ):
            assert _plain_reply(llm, other) is None  # the model's own parser reads (or rejects) these
