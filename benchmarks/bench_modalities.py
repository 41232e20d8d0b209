"""classify(llm=...) and vision() encoding against the raw work they wrap.

- ``aclassify(llm=...)`` for the seed's 3 questions (choice/noul/score) over FakeOpenAIServer on 127.0.0.1, vs
  (a) the same 3 Chat Completions requests sent in parallel with a raw ``httpx.AsyncClient`` and read by hand
  (softmax over the label tokens), and (b) the same 3 requests through the chat model itself (``llm.abatch``),
  the generic path every other chat model takes (LangChain + the OpenAI SDK).
- ``vision`` with a 1 MB PNG: turning the bytes into the ``image_url`` part vs ``base64.b64encode`` alone and vs
  the hand-written data URL.
"""

from __future__ import annotations

import asyncio
import base64
import math
import os
import struct
import zlib
from typing import Any

import httpx
from _harness import Metric
from bench_classify import QUESTIONS, STATE

from ai_utils import aclassify, get_llm
from ai_utils._images import image_parts
from ai_utils.testing import FakeOpenAIServer

_server: FakeOpenAIServer | None = None
_LABELS = {"Which team": "ABCD", "explicitly request": ("YES", "NO"), "How urgent": "012"}


def _openai() -> FakeOpenAIServer:
    global _server
    if _server is None:
        _server = FakeOpenAIServer()
        _server.start()
        _server.reply("A", logprobs={"A": -0.1, "B": -2.5, "C": -4.0, "D": -5.0, "The": -6.0}, when="Which team")
        _server.reply("Yes", logprobs={"Yes": -0.1, "No": -2.5, "yes": -4.0}, when="explicitly request")
        _server.reply("2", logprobs={"2": -0.2, "1": -1.9, "0": -5.0}, when="How urgent")
    return _server


def _png(size: int = 1_000_000) -> bytes:
    """A real ~1 MB PNG of random pixels (stored, not compressed)."""
    side = int(math.sqrt(size / 3))
    row = side * 3
    pixels = os.urandom(row * side)
    raw = b"".join(b"\x00" + pixels[y * row : (y + 1) * row] for y in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b"")


def metrics() -> list[Metric]:
    server = _openai()
    llm = get_llm("local", "fake-gpt", base_url=server.url, api_key=server.api_key)
    headers = {"Authorization": f"Bearer {server.api_key}"}
    clients: dict[str, Any] = {}

    async def ours() -> None:
        result = await aclassify(STATE, QUESTIONS, llm=llm)
        assert result.choices["category"].choice == "billing"

    # The exact request bodies and messages classify() sends, captured once.
    asyncio.run(aclassify(STATE, QUESTIONS, llm=llm))
    # They arrive in any order; the choice question first, so the anchor's check below reads its answer.
    bodies = sorted(
        (request.body for request in server.requests[-3:]),
        key=lambda body: "Which team" not in body["messages"][-1]["content"],
    )
    from ai_utils.jev._logprob import _plan

    _, asks = _plan(STATE, QUESTIONS)
    bound = llm.bind(logprobs=True, top_logprobs=20, max_tokens=1)

    def read(body: dict[str, Any], reply: dict[str, Any]) -> list[float]:
        labels = next(v for k, v in _LABELS.items() if k in body["messages"][-1]["content"])
        entry = reply["choices"][0]["logprobs"]["content"][0]
        found = {t["token"].strip().upper(): t["logprob"] for t in entry["top_logprobs"]}
        weights = [math.exp(found[label]) if label in found else 0.0 for label in labels]
        return [w / sum(weights) for w in weights]

    async def anchor_httpx() -> None:
        if "httpx" not in clients:
            clients["httpx"] = httpx.AsyncClient()
        client: httpx.AsyncClient = clients["httpx"]

        async def one(body: dict[str, Any]) -> list[float]:
            response = await client.post(f"{server.url}/chat/completions", json=body, headers=headers)
            response.raise_for_status()
            return read(body, response.json())

        results = await asyncio.gather(*(one(body) for body in bodies))
        assert results[0][0] > 0.8

    async def anchor_chat_model() -> None:
        replies = await bound.abatch([ask.messages for ask in asks])
        assert replies[0].response_metadata["logprobs"]["content"][0]["token"] == "A"

    image = _png()
    prefix = "data:image/png;base64,"

    def ours_encode() -> None:
        image_parts([image], "auto")

    def anchor_b64() -> None:
        base64.b64encode(image)

    def anchor_data_url() -> None:
        _ = prefix + base64.b64encode(image).decode("ascii")

    classify_note = (
        "seed's 3 questions, one request each, in parallel; FakeOpenAIServer on 127.0.0.1 (zero model latency). "
        "get_llm('local') is a plain ChatOpenAI (no custom client, limiter or cache), so classify(llm=) sends the "
        "model's own request body with pooled "
        "httpx and builds the reply with the model's own parser (ai_utils/jev/_logprob_http.py); through "
        "ChatOpenAI + the OpenAI SDK (the llm.abatch row) one request costs ~2.5x a raw httpx POST here."
    )
    encode_note = (
        f"{len(image)} byte PNG from bytes; image_parts() sniffs the type and builds the data URL. On this VM each "
        "new 1.4 MB buffer costs ~344 page faults; the data URL needs three (base64 bytes, str, prefixed str) "
        "where b64encode alone needs one, so the b64encode row measures the allocator, the data-URL row the work."
    )
    return [
        Metric(
            "aclassify(llm=) 3 questions / 3 parallel raw httpx chat completions + softmax",
            ours,
            anchor_httpx,
            1.15,
            note=classify_note,
        ),
        Metric(
            "aclassify(llm=) 3 questions / the same 3 requests via llm.abatch (report)",
            ours,
            anchor_chat_model,
            None,
            note=classify_note,
        ),
        Metric("vision encode 1 MB PNG / base64.b64encode", ours_encode, anchor_b64, 1.2, note=encode_note),
        Metric(
            "vision encode 1 MB PNG / hand-written data URL (b64encode + decode + prefix)",
            ours_encode,
            anchor_data_url,
            1.2,
            note=encode_note,
        ),
    ]
