from __future__ import annotations

import pickle

import httpx
import pytest
from _services import Aimock, free_port
from openai import OpenAI

from ai_utils.exceptions import ProviderError
from ai_utils.gateway import AuditWriteError, GatewayError, PolicyDecision, classify_llm_error


def _raise_from(aimock: Aimock, status: int) -> BaseException:
    aimock.add(
        {"match": {"userMessage": "boom"}, "response": {"error": {"message": f"status {status}"}, "status": status}}
    )
    client = OpenAI(base_url=aimock.openai_base_url, api_key="test", max_retries=0)
    with pytest.raises(Exception) as caught:
        client.chat.completions.create(model="gpt-4.1-mini", messages=[{"role": "user", "content": "boom"}])
    aimock.reset()
    return caught.value


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (429, ("rate_limit", True)),
        (401, ("auth", False)),
        (403, ("auth", False)),
        (500, ("provider", True)),
        (503, ("provider", True)),
        (400, ("provider", False)),
    ],
)
def test_real_openai_sdk_errors_are_classified(aimock: Aimock, status: int, expected: tuple[str, bool]) -> None:
    assert classify_llm_error(_raise_from(aimock, status)) == expected


def test_connection_errors_are_network_and_retriable() -> None:
    client = OpenAI(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="test", max_retries=0, timeout=5)
    with pytest.raises(Exception) as caught:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert classify_llm_error(caught.value) == ("network", True)
    assert classify_llm_error(TimeoutError()) == ("network", True)


def test_httpx_status_errors_use_the_response_status() -> None:
    request = httpx.Request("POST", "http://127.0.0.1/x")
    err = httpx.HTTPStatusError("bad", request=request, response=httpx.Response(502, request=request))
    assert classify_llm_error(err) == ("provider", True)


def test_policy_provider_and_unknown_errors() -> None:
    assert classify_llm_error(GatewayError("denied")) == ("policy", False)
    assert classify_llm_error(AuditWriteError("sink down")) == ("unknown", False)
    assert classify_llm_error(ProviderError("cli died", provider="claude-cli")) == ("provider", False)
    assert classify_llm_error(ValueError("?")) == ("unknown", False)


def test_gateway_error_keeps_decisions_through_pickle() -> None:
    err = GatewayError("denied", [PolicyDecision("require_actor", False, "no actor")])
    clone = pickle.loads(pickle.dumps(err))
    assert (str(clone), clone.decisions) == ("denied", err.decisions)
