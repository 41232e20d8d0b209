"""The sans-IO exchange: send, retry, sleep and give up as a pure state machine."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ai_utils.jev import JevTimeoutError
from ai_utils.jev import _protocol as proto

PLAN = proto.plan_questions({"refund": {"type": "noul", "instructions": "Refund?"}})
REQUEST = httpx.Request("POST", "http://127.0.0.1:1/api/alpha/decisions", content=b"{}")
OK = {"model": "m", "answers": {"refund": {"type": "noul", "noul": 0.7}}}


def response(status: int, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers, request=REQUEST)


def test_exchange_gives_up_with_a_timeout_when_the_deadline_has_passed() -> None:
    clock = iter([0.0, 0.0, 0.0, 5.0]).__next__
    steps = proto.exchange(
        PLAN, REQUEST, timeout=2, max_retries=2, max_retry_wait=1, key_env="K", clock=lambda: clock()
    )

    send = next(steps)
    assert isinstance(send, proto.Send) and send.timeout == 2.0
    sleep = steps.send(response(429, headers={"retry-after": "1"}))
    assert sleep == proto.Sleep(1.0)
    with pytest.raises(JevTimeoutError, match="within 2 s"):
        steps.send(None)


def test_exchange_returns_the_parsed_result_on_success() -> None:
    steps = proto.exchange(PLAN, REQUEST, timeout=2, max_retries=0, max_retry_wait=1, key_env="K")
    next(steps)

    with pytest.raises(StopIteration) as stop:
        steps.send(response(200, OK))

    assert stop.value.value.answers["refund"].noul == 0.7
