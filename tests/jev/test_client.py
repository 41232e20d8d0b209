"""JevClient over real HTTP: retries, retry-after, timeouts, cancellation, connection reuse, injection."""

from __future__ import annotations

import asyncio
import email.utils
import pickle
import time
from typing import Any

import httpx
import pytest

from ai_utils.exceptions import AiUtilsError, UserError
from ai_utils.jev import JevAPIError, JevClient, JevConnectionError, JevTimeoutError, aclassify, classify
from ai_utils.testing.jev_server import FakeJevServer

REFUND = {"refund": {"type": "noul", "instructions": "Does `message` explicitly request a refund?"}}
STATE = {"message": "Refund me"}


def client(jev: FakeJevServer, **kwargs: Any) -> JevClient:
    return JevClient(base_url=jev.url, api_key=jev.api_key, **kwargs)


def test_429_is_retried_after_the_seconds_retry_after_asks_for(jev: FakeJevServer) -> None:
    jev.fail(429, times=2, retry_after=0.2)
    jev.answer("refund", noul=0.8)

    with client(jev) as jev_client:
        started = time.perf_counter()
        result = jev_client.classify(STATE, REFUND)
        elapsed = time.perf_counter() - started

    assert result.answers["refund"].noul == 0.8
    assert len(jev.requests) == 3
    assert 0.4 <= elapsed < 2.0


async def test_async_calls_retry_the_same_way(jev: FakeJevServer) -> None:
    jev.fail(503, times=2, retry_after=0.1)
    jev.answer("refund", noul=0.6)

    started = time.perf_counter()
    async with client(jev) as jev_client:
        result = await jev_client.aclassify(STATE, REFUND)

    assert result.answers["refund"].noul == 0.6
    assert len(jev.requests) == 3
    assert 0.2 <= time.perf_counter() - started < 2.0


def test_retry_after_ms_is_honoured_before_retry_after(jev: FakeJevServer) -> None:
    jev.fail(429, retry_after_ms=150, retry_after=30)

    with client(jev, max_retry_wait=1) as jev_client:
        started = time.perf_counter()
        jev_client.classify(STATE, REFUND)
        elapsed = time.perf_counter() - started

    assert len(jev.requests) == 2
    assert 0.15 <= elapsed < 1.0


def test_retry_after_as_an_http_date_is_honoured(jev: FakeJevServer) -> None:
    jev.fail(503, retry_after=email.utils.formatdate(time.time() + 1, usegmt=True))

    with client(jev) as jev_client:
        started = time.perf_counter()
        jev_client.classify(STATE, REFUND)
        elapsed = time.perf_counter() - started

    assert len(jev.requests) == 2
    assert elapsed < 2.5


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 524, 529])
def test_retryable_statuses_are_retried_twice_then_raised_with_status_and_body(jev: FakeJevServer, status: int) -> None:
    jev.fail(status, times=3, retry_after=0)

    with pytest.raises(JevAPIError) as caught, client(jev) as jev_client:
        jev_client.classify(STATE, REFUND)

    assert caught.value.status == status
    assert caught.value.body == {"error": {"code": status, "message": f"Fake failure {status}"}}
    assert "after 3 attempts" in str(caught.value)
    assert len(jev.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 413, 422])
def test_other_4xx_are_never_retried(jev: FakeJevServer, status: int) -> None:
    jev.fail(status, retry_after=0)

    with pytest.raises(JevAPIError) as caught, client(jev) as jev_client:
        jev_client.classify(STATE, REFUND)

    assert caught.value.status == status
    assert len(jev.requests) == 1


def test_a_5xx_without_retry_after_backs_off_but_never_longer_than_max_retry_wait(jev: FakeJevServer) -> None:
    jev.fail(500, times=2)

    with client(jev, max_retry_wait=0.05) as jev_client:
        started = time.perf_counter()
        jev_client.classify(STATE, REFUND)

    assert time.perf_counter() - started < 1.0
    assert len(jev.requests) == 3


def test_a_retry_after_longer_than_max_retry_wait_is_not_waited_for(jev: FakeJevServer) -> None:
    jev.fail(429, retry_after=60)

    with pytest.raises(JevAPIError) as caught, client(jev, max_retry_wait=1) as jev_client:
        jev_client.classify(STATE, REFUND)

    assert caught.value.status == 429
    assert len(jev.requests) == 1


def test_max_retries_zero_sends_once(jev: FakeJevServer) -> None:
    jev.fail(503, retry_after=0)

    with pytest.raises(JevAPIError), client(jev, max_retries=0) as jev_client:
        jev_client.classify(STATE, REFUND)

    assert len(jev.requests) == 1


def test_a_retry_that_would_outlast_the_timeout_raises_the_last_error_at_once(jev: FakeJevServer) -> None:
    jev.fail(429, times=3, retry_after=5)

    started = time.perf_counter()
    with pytest.raises(JevAPIError) as caught:
        classify(STATE, REFUND, base_url=jev.url, api_key=jev.api_key, timeout=1)

    assert caught.value.status == 429
    assert time.perf_counter() - started < 0.5
    assert len(jev.requests) == 1


def test_a_slow_server_is_a_jev_timeout_error(jev: FakeJevServer) -> None:
    jev.delay(3)

    started = time.perf_counter()
    with pytest.raises(JevTimeoutError) as caught:
        classify(STATE, REFUND, base_url=jev.url, api_key=jev.api_key, timeout=0.3)

    assert time.perf_counter() - started < 1.5
    assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, AiUtilsError)
    assert caught.value.timeout == 0.3
    assert "0.3 s" in str(caught.value)


async def test_a_slow_server_is_a_jev_timeout_error_in_async_code_too(jev: FakeJevServer) -> None:
    jev.delay(3)

    started = time.perf_counter()
    with pytest.raises(JevTimeoutError):
        await aclassify(STATE, REFUND, base_url=jev.url, api_key=jev.api_key, timeout=0.3)

    assert time.perf_counter() - started < 1.5


async def test_cancelling_aclassify_aborts_the_http_request(jev: FakeJevServer) -> None:
    jev.delay(5)
    task = asyncio.create_task(aclassify(STATE, REFUND, base_url=jev.url, api_key=jev.api_key))
    while not jev.requests:
        await asyncio.sleep(0.01)

    started = time.perf_counter()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert time.perf_counter() - started < 0.5
    for _ in range(100):
        if jev.disconnects:
            break
        await asyncio.sleep(0.02)
    assert jev.disconnects == 1


def test_an_unreachable_server_is_a_jev_connection_error_after_retries() -> None:
    with FakeJevServer() as gone:
        url = gone.url

    with pytest.raises(JevConnectionError, match="Could not reach Jev") as caught:
        JevClient(base_url=url, api_key="k", max_retry_wait=0.01).classify(STATE, REFUND)

    assert isinstance(caught.value, ConnectionError)


async def test_an_unreachable_server_is_a_jev_connection_error_in_async_code_too() -> None:
    with FakeJevServer() as gone:
        url = gone.url

    async with JevClient(base_url=url, api_key="k", max_retries=0) as jev_client:
        with pytest.raises(JevConnectionError):
            await jev_client.aclassify(STATE, REFUND)


def test_one_client_serves_many_calls_and_closes_what_it_created(jev: FakeJevServer) -> None:
    jev_client = client(jev)
    for _ in range(3):
        jev_client.classify(STATE, REFUND)
    http = jev_client._http_client

    jev_client.close()

    assert len(jev.requests) == 3
    assert http is not None and http.is_closed


def test_an_injected_http_client_is_used_and_left_open(jev: FakeJevServer) -> None:
    with httpx.Client(headers={"X-Trace": "abc"}) as http:
        with client(jev, http_client=http, headers={"X-OpenRouter-Title": "demo"}) as jev_client:
            jev_client.classify(STATE, REFUND)
        assert not http.is_closed

    headers = jev.requests[0].headers
    assert headers["x-trace"] == "abc"
    assert headers["x-openrouter-title"] == "demo"
    assert headers["user-agent"].startswith("ai-utils/")


async def test_an_injected_async_http_client_is_used_and_left_open(jev: FakeJevServer) -> None:
    async with httpx.AsyncClient(headers={"X-Trace": "async"}) as http:
        async with client(jev, async_http_client=http) as jev_client:
            await jev_client.aclassify(STATE, REFUND)
        assert not http.is_closed

    assert jev.requests[0].headers["x-trace"] == "async"


async def test_sync_and_async_send_byte_identical_requests(jev: FakeJevServer) -> None:
    with client(jev) as jev_client:
        await asyncio.to_thread(jev_client.classify, STATE, REFUND)
    async with client(jev) as jev_client:
        await jev_client.aclassify(STATE, REFUND)

    first, second = jev.requests
    assert first.raw == second.raw
    assert first.headers["authorization"] == second.headers["authorization"]


def test_per_call_model_and_timeout_override_the_client_defaults(jev: FakeJevServer) -> None:
    with client(jev, model="typesafe/jev-1.13") as jev_client:
        jev_client.classify(STATE, REFUND)
        jev_client.classify(STATE, REFUND, model="~typesafe/jev-latest", timeout=5)

    assert [r.body["model"] for r in jev.requests] == ["typesafe/jev-1.13", "~typesafe/jev-latest"]


def test_the_client_repr_and_errors_never_show_the_key(jev: FakeJevServer) -> None:
    jev_client = JevClient(base_url=jev.url, api_key="sk-or-very-secret")

    with pytest.raises(JevAPIError) as caught:
        jev_client.classify(STATE, REFUND)
    jev_client.close()

    assert "sk-or-very-secret" not in repr(jev_client)
    assert "sk-or-very-secret" not in repr(jev_client._endpoint)
    assert "sk-or-very-secret" not in str(caught.value)
    assert (
        repr(jev_client)
        == f"JevClient(provider='openrouter', url='{jev.url}/alpha/decisions', model='~typesafe/jev-latest')"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"max_retries": -1}, "max_retries"), ({"max_retry_wait": -1}, "max_retry_wait")]
)
def test_bad_retry_settings_are_user_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        JevClient(api_key="k", **kwargs)


def test_errors_survive_pickling(jev: FakeJevServer) -> None:
    jev.fail(400, body={"error": {"code": 400, "message": "bad"}})
    with pytest.raises(JevAPIError) as caught, client(jev) as jev_client:
        jev_client.classify(STATE, REFUND)

    copy = pickle.loads(pickle.dumps(caught.value))
    timeout = pickle.loads(pickle.dumps(JevTimeoutError("slow", timeout=2.0)))

    assert (type(copy), copy.status, copy.body, str(copy)) == (JevAPIError, 400, caught.value.body, str(caught.value))
    assert (timeout.timeout, str(timeout)) == (2.0, "slow")
