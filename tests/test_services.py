"""The offline services the suite relies on really start and answer."""

from __future__ import annotations

import httpx
from _services import Aimock


def test_aimock_serves_a_chat_completion_over_http(aimock: Aimock) -> None:
    aimock.add({"match": {"userMessage": "ping"}, "response": {"content": "pong"}})
    r = httpx.post(
        f"{aimock.openai_base_url}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "ping"}]},
        headers={"Authorization": "Bearer x"},
    )
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] == "pong"
    assert [b["messages"][0]["content"] for b in aimock.request_bodies()] == ["ping"]
