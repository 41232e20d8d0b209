"""A broken or hostile OpenAI-compatible server under classify(..., llm=): non-finite logprobs (``NaN``,
``Infinity``, ``-Infinity``) and bodies that are not JSON are a `ModelOutputError` on both paths -- the fast
direct-HTTP one (`get_llm("local")`) and the generic one through the OpenAI SDK -- never a raw decode error.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from ai_utils import ModelOutputError, classify, get_llm
from ai_utils.testing import FakeOpenAIServer

QUESTION = {"refund": {"type": "noul", "instructions": "Does `message` explicitly request a refund?"}}
STATE = {"message": "Refund me."}


def _body(logprob: str) -> bytes:
    """A Chat Completions reply whose first answer token carries ``logprob`` verbatim (not valid JSON for NaN)."""
    alternatives = f'[{{"token": "Yes", "logprob": {logprob}}}, {{"token": "No", "logprob": -2.0}}]'
    content = f'[{{"token": "Yes", "logprob": {logprob}, "top_logprobs": {alternatives}}}]'
    return (
        '{"id": "c1", "object": "chat.completion", "created": 1, "model": "fake-gpt", "choices": [{"index": 0, '
        '"message": {"role": "assistant", "content": "Yes"}, "finish_reason": "stop", '
        f'"logprobs": {{"content": {content}}}}}], '
        '"usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}'
    ).encode()


def _model(server: FakeOpenAIServer, path: str) -> Any:
    options: dict[str, Any] = {}
    if path == "generic":  # own HTTP clients: classify leaves the sending to the OpenAI SDK
        options = {"http_client": httpx.Client(), "http_async_client": httpx.AsyncClient()}
    return get_llm("local", "fake-gpt", base_url=server.url, api_key=server.api_key, max_retries=0, **options)


@pytest.mark.parametrize("path", ["fast", "generic"])
@pytest.mark.parametrize("logprob", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_logprobs_are_a_model_output_error(openai_server: FakeOpenAIServer, path: str, logprob: str) -> None:
    llm = _model(openai_server, path)
    # The attack: the raw body would make orjson raise its own JSONDecodeError on the fast path.
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(_body(logprob))
    openai_server.fail(200, body=_body(logprob))

    with pytest.raises(ModelOutputError) as info:
        classify(STATE, QUESTION, llm=llm)

    assert not isinstance(info.value, orjson.JSONDecodeError)
    assert "logprob" in str(info.value) or "not valid JSON" in str(info.value)
    if path == "generic":
        llm.http_client.close()


def test_a_body_that_is_not_json_is_a_model_output_error_on_the_fast_path(openai_server: FakeOpenAIServer) -> None:
    openai_server.fail(200, body=b"<html>upstream proxy error</html>")
    with pytest.raises(ModelOutputError, match="not valid JSON"):
        classify(STATE, QUESTION, llm=_model(openai_server, "fast"))


def test_finite_logprobs_still_classify(openai_server: FakeOpenAIServer) -> None:
    openai_server.fail(200, body=_body("-0.1"))
    result = classify(STATE, QUESTION, llm=_model(openai_server, "fast"))
    assert result.answers["refund"].noul > 0.8
