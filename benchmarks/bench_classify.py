"""classify() vs a raw httpx POST of the same body + pydantic model_validate_json, same fake Jev server.

performance.md metric 6: `classify()` p50 / raw `httpx.post` + `model_validate_json`, at c = 1 and c = 10.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

import httpx
from _harness import Metric
from pydantic import BaseModel, Field

from ai_utils.jev import JevClient, classify
from ai_utils.testing.jev_server import FakeJevServer

STATE = {"message": "I was charged twice. Please refund one charge urgently.", "customerTier": "business"}
QUESTIONS: dict[str, Any] = {
    "category": {
        "type": "choice",
        "instructions": "Which team should handle `message`?",
        "criteria": {
            "billing": "Payments, invoices, charges, or refunds",
            "technical": "Bugs, outages, or integrations",
            "sales": "Pricing, upgrades, or new accounts",
            "other": None,
        },
    },
    "refundRequested": {"type": "noul", "instructions": "Does `message` explicitly request a refund?"},
    "urgency": {
        "type": "score",
        "instructions": "How urgent is the request in `message`?",
        "criteria": ["Can wait", "Time-sensitive", "Immediately blocking"],
    },
}
BODY = {"model": "~typesafe/jev-latest", "state": STATE, "questions": QUESTIONS}
CONCURRENCY = 10


class _Choice(BaseModel):
    type: Literal["choice"]
    choice: str
    probabilities: dict[str, float]
    confidence: float


class _Noul(BaseModel):
    type: Literal["noul"]
    noul: float


class _Score(BaseModel):
    type: Literal["score"]
    score: float
    legend: dict[int, Any]
    probabilities: dict[int, float]
    confidence: float


class _Usage(BaseModel):
    input_tokens: int
    output_tokens: int
    cost: float | None = None


class RawReply(BaseModel):
    """The anchor's reply model: the same fields classify() returns, validated in one pydantic call."""

    model: str
    answers: dict[str, Annotated[_Choice | _Noul | _Score, Field(discriminator="type")]]
    usage: _Usage
    id: str | None = None
    provider: str | None = None


_server: FakeJevServer | None = None


def _jev() -> FakeJevServer:
    global _server
    if _server is None:
        _server = FakeJevServer().start()
        _server.answer("urgency", score=1.7)
    return _server


def metrics() -> list[Metric]:
    jev = _jev()
    url = jev.url + "/alpha/decisions"
    headers = {"Authorization": f"Bearer {jev.api_key}"}
    pooled = JevClient(base_url=jev.url, api_key=jev.api_key)
    raw_pooled = httpx.Client()
    clients: dict[str, Any] = {}

    def ours_pooled() -> None:
        assert pooled.classify(STATE, QUESTIONS).answers["urgency"].score == 1.7

    def anchor_pooled() -> None:
        reply = raw_pooled.post(url, json=BODY, headers=headers)
        reply.raise_for_status()
        assert RawReply.model_validate_json(reply.content).answers["urgency"].score == 1.7

    def ours_one_shot() -> None:
        assert classify(STATE, QUESTIONS, base_url=jev.url, api_key=jev.api_key).answers["urgency"].score == 1.7

    def anchor_one_shot() -> None:
        reply = httpx.post(url, json=BODY, headers=headers)
        reply.raise_for_status()
        assert RawReply.model_validate_json(reply.content).answers["urgency"].score == 1.7

    async def ours_concurrent() -> None:
        # Clients are created inside the harness's one event loop and reused by every sample.
        if "ours" not in clients:
            clients["ours"] = JevClient(base_url=jev.url, api_key=jev.api_key)
        client: JevClient = clients["ours"]
        results = await asyncio.gather(*(client.aclassify(STATE, QUESTIONS) for _ in range(CONCURRENCY)))
        assert all(r.answers["urgency"].score == 1.7 for r in results)

    async def anchor_concurrent() -> None:
        if "anchor" not in clients:
            clients["anchor"] = httpx.AsyncClient()
        client: httpx.AsyncClient = clients["anchor"]

        async def one() -> RawReply:
            reply = await client.post(url, json=BODY, headers=headers)
            reply.raise_for_status()
            return RawReply.model_validate_json(reply.content)

        results = await asyncio.gather(*(one() for _ in range(CONCURRENCY)))
        assert all(r.answers["urgency"].score == 1.7 for r in results)

    note = "seed's 3 questions (choice/noul/score); FakeJevServer on 127.0.0.1; anchor model has the same fields."
    return [
        Metric("classify c=1 (JevClient) / httpx.Client.post+validate", ours_pooled, anchor_pooled, 1.10, note=note),
        Metric("classify() one-shot / httpx.post+validate", ours_one_shot, anchor_one_shot, 1.10, note=note),
        Metric(
            f"aclassify c={CONCURRENCY} (JevClient) / AsyncClient.post+validate",
            ours_concurrent,
            anchor_concurrent,
            1.10,
            note=f"{CONCURRENCY} concurrent calls per sample over one pooled client each; {note}",
        ),
    ]
