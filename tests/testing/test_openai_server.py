"""FakeOpenAIServer speaks Chat Completions to the real OpenAI client stack (ChatOpenAI over httpx)."""

from __future__ import annotations

import httpx
import openai
import pytest

from ai_utils import UserError, get_llm
from ai_utils.testing import FakeOpenAIServer


def test_replies_failures_and_the_journal_through_chat_openai() -> None:
    with FakeOpenAIServer(model="fake-gpt-2026") as server:
        server.fail(503, times=1, retry_after=0.01)
        server.reply("Hello there, friend.", when="greet")
        llm = get_llm("local", "fake-gpt", base_url=server.url, api_key=server.api_key, max_retries=1)

        reply = llm.invoke("Please greet me")  # the 503 is retried by the OpenAI client, then answered

        assert reply.text == "Hello there, friend."
        assert reply.response_metadata["model_name"] == "fake-gpt-2026"
        assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] == 3
        assert [r.text for r in server.requests] == ["Please greet me", "Please greet me"]
        assert llm.invoke("anything else").text == "ok"

        short = get_llm("local", "fake-gpt", base_url=server.url, api_key=server.api_key, max_tokens=2)
        cut = short.invoke("Please greet me")
        assert (cut.text, cut.response_metadata["finish_reason"]) == ("Hello there, ", "length")

        server.reply_with(lambda body: {"content": "from fn", "model": "fn-model"} if body["model"] == "x" else None)
        other = get_llm("local", "x", base_url=server.url, api_key=server.api_key)
        assert other.invoke("hi").text == "from fn"
        server.reply_with(lambda body: {"bogus": 1})
        with pytest.raises(openai.InternalServerError, match="unknown keys"):
            get_llm("local", "x", base_url=server.url, api_key=server.api_key, max_retries=0).invoke("hi")

        server.reset()
        assert server.requests == []
        with pytest.raises(openai.AuthenticationError):
            get_llm("local", "x", base_url=server.url, api_key="wrong", max_retries=0).invoke("hi")
        assert (
            httpx.post(
                f"{server.url}/embeddings", json={}, headers={"Authorization": "Bearer fake-openai-key"}
            ).status_code
            == 404
        )
        streamed = httpx.post(
            f"{server.url}/chat/completions",
            json={"model": "x", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": "Bearer fake-openai-key"},
        )
        assert streamed.status_code == 400 and "does not stream" in streamed.text
        with pytest.raises(UserError, match="log-probabilities are <= 0"):
            server.reply("A", logprobs={"A": 0.3})


def test_logprobs_follow_the_request_and_the_server_mode() -> None:
    with FakeOpenAIServer() as server:
        server.reply("B", logprobs={"A": -1.2, "B": -0.4, "C": -3.0})
        body = {"model": "x", "messages": [{"role": "user", "content": "Pick"}], "logprobs": True, "top_logprobs": 2}
        headers = {"Authorization": "Bearer fake-openai-key"}

        (entry,) = httpx.post(f"{server.url}/chat/completions", json=body, headers=headers).json()["choices"][0][
            "logprobs"
        ]["content"]

        assert entry["token"] == "B" and entry["logprob"] == -0.4 and entry["bytes"] == [66]
        assert [(t["token"], t["logprob"]) for t in entry["top_logprobs"]] == [("B", -0.4), ("A", -1.2)]
        plain = httpx.post(f"{server.url}/chat/completions", json={**body, "logprobs": False}, headers=headers)
        assert plain.json()["choices"][0]["logprobs"] is None
        server.logprobs = False
        ignored = httpx.post(f"{server.url}/chat/completions", json=body, headers=headers)
        assert ignored.json()["choices"][0]["logprobs"] is None
