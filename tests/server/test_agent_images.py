"""Image prompts through `agent_routes` over real HTTP (uvicorn, aimock as the OpenAI server), in all three protocols.

NDJSON takes ``input`` as content blocks, AG-UI an ``image`` part (sent by AG-UI's own ``HttpAgent``), the Vercel AI
SDK an image ``file`` part (sent by the SDK's own ``Chat``): each reaches the model server as an ``image_url`` part,
and the thread keeps it for the next turn. A bad image, a part that is no image, too many or too large images are a
400 JSON error object before the model is called: nothing the client sent is silently dropped.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, Literal

import httpx
import pytest
from _media import JPEG_HEAD, png
from _services import Aimock
from conftest import LiveServer
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils import Agent, agent_routes, get_llm
from ai_utils.client import iter_ndjson

ALICE = {"authorization": "Bearer alice-token"}
RED = png(2, 2)
IMAGE = base64.b64encode(RED).decode()
SEEN = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + IMAGE}}


def text_of(response: httpx.Response) -> str:
    return "".join(c for c in iter_ndjson(response.iter_lines()) if isinstance(c, str))


def model_calls(aimock: Aimock) -> list[dict[str, Any]]:
    return [b for b in aimock.request_bodies() if "messages" in b]


@pytest.fixture
def vision(aimock: Aimock, monkeypatch: pytest.MonkeyPatch) -> Agent:
    """An agent on aimock's OpenAI API with a checkpointer (threads keep their images)."""
    monkeypatch.setenv("LOCAL_LLM_BASE_URL", aimock.openai_base_url)
    return Agent(llm=get_llm("local", "vision-1"), checkpointer=InMemorySaver(), name="vision")


def test_an_ndjson_image_prompt_reaches_the_model_and_stays_in_the_thread(
    serve: Callable[[Any], LiveServer], app: Any, authenticate: Any, aimock: Aimock, vision: Agent
) -> None:
    aimock.add(
        {"match": {"userMessage": "Was ist das"}, "response": {"content": "Ein rotes Quadrat."}},
        {"match": {"userMessage": "Und welche Farbe"}, "response": {"content": "Rot."}},
    )
    live = serve(app(agent_routes(vision, path="/agent", authenticate=authenticate, max_body_bytes=64_000)))
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        blocks = [{"type": "text", "text": "Was ist das?"}, {"type": "image", "data": IMAGE, "mime_type": "image/png"}]
        first = http.post("/agent", json={"input": blocks}, headers=ALICE)
        assert first.status_code == 200 and text_of(first) == "Ein rotes Quadrat."
        thread = first.headers["x-thread-id"]
        # The next turn of the thread: the model sees the earlier image again (the checkpoint kept it).
        second = http.post("/agent", json={"input": "Und welche Farbe?", "thread_id": thread}, headers=ALICE)
        assert second.status_code == 200 and text_of(second) == "Rot."
    first_call, second_call = model_calls(aimock)
    assert first_call["messages"][-1]["content"] == [{"type": "text", "text": "Was ist das?"}, SEEN]
    assert second_call["messages"][0]["content"] == [{"type": "text", "text": "Was ist das?"}, SEEN]
    assert second_call["messages"][-1]["content"] == "Und welche Farbe?"


def test_the_ai_sdk_and_ag_ui_clients_send_an_image_that_reaches_the_model(
    serve: Callable[[Any], LiveServer], app: Any, authenticate: Any, aimock: Aimock, vision: Agent, node: Any
) -> None:
    aimock.add(
        {"match": {"userMessage": "Was ist das (AI SDK)?"}, "response": {"content": "Rot, sagt das SDK."}},
        {"match": {"userMessage": "Was ist das (AG-UI)?"}, "response": {"content": "Rot, sagt AG-UI."}},
    )
    live = serve(
        app(
            agent_routes(vision, path="/vercel", protocol="vercel-ai", authenticate=authenticate),
            agent_routes(vision, path="/agui", protocol="ag-ui", authenticate=authenticate),
        )
    )
    config = {
        "base": live.base_url,
        "token": "alice-token",
        "png": IMAGE,
        "paths": {"vercel": "/vercel", "agui": "/agui"},
    }
    report = node("image_clients.mjs", config)
    assert report["vercel"]["error"] is None and report["vercel"]["text"] == "Rot, sagt das SDK.", report["vercel"]
    assert report["agui"]["ok"] and report["agui"]["text"] == "Rot, sagt AG-UI.", report["agui"]
    assert [b["messages"][-1]["content"] for b in model_calls(aimock)] == [
        [{"type": "text", "text": f"Was ist das ({who})?"}, SEEN] for who in ("AI SDK", "AG-UI")
    ]


def ndjson(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"input": [{"type": "text", "text": "Was ist das?"}, *blocks]}


def ag_ui(*parts: dict[str, Any]) -> dict[str, Any]:
    content = [{"type": "text", "text": "Was ist das?"}, *parts]
    message = {"id": "u-1", "role": "user", "content": content}
    return {"threadId": "t-1", "runId": "r-1", "state": {}, "messages": [message], "tools": [], "context": []}


def vercel(*parts: dict[str, Any]) -> dict[str, Any]:
    message = {"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "Was ist das?"}, *parts]}
    return {"id": "c-1", "messages": [message], "trigger": "submit-message"}


def png_block(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": base64.b64encode(data).decode(), "mime_type": mime}


HTML = base64.b64encode(b"<html>").decode()
BIG = png(1, 1, padding=4 * 1024 * 1024)  # a real PNG over the 3.75 MiB an image may have

BAD: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "ndjson",
        "not canonical base64",
        ndjson({"type": "image", "data": IMAGE + "\n", "mime_type": "image/png"}),
        "canonical",
    ),
    ("ndjson", "not an image", ndjson({"type": "image", "data": HTML, "mime_type": "image/png"}), "PNG"),
    ("ndjson", "a JPEG said to be a PNG", ndjson(png_block(JPEG_HEAD + b"\0" * 8)), "image/jpeg"),
    ("ndjson", "a web URL", ndjson({"type": "image_url", "url": "https://example.com/a.png"}), "data URL"),
    ("ndjson", "nine images", ndjson(*[png_block(RED)] * 9), "at most 8"),
    ("ndjson", "one image too large", ndjson(png_block(BIG)), "3.75 MiB"),
    ("ndjson", "an unknown block", ndjson({"type": "audio", "data": IMAGE}), "'audio'"),
    ("ndjson", "blocks that are no objects", {"input": ["Was ist das?"]}, "content blocks"),
    (
        "ag-ui",
        "not an image",
        ag_ui({"type": "image", "source": {"type": "data", "value": HTML, "mimeType": "image/png"}}),
        "PNG",
    ),
    (
        "ag-ui",
        "a web URL",
        ag_ui({"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}}),
        "data URL",
    ),
    (
        "ag-ui",
        "an audio part",
        ag_ui({"type": "audio", "source": {"type": "data", "value": IMAGE, "mimeType": "audio/wav"}}),
        "'audio'",
    ),
    (
        "vercel-ai",
        "a PDF",
        vercel({"type": "file", "mediaType": "application/pdf", "url": "data:application/pdf;base64,AAAA"}),
        "no image",
    ),
    (
        "vercel-ai",
        "a web URL",
        vercel({"type": "file", "mediaType": "image/png", "url": "https://example.com/a.png"}),
        "data URL",
    ),
    (
        "vercel-ai",
        "not an image",
        vercel({"type": "file", "mediaType": "image/png", "url": "data:image/png;base64," + HTML}),
        "PNG",
    ),
]


def test_a_bad_image_is_a_400_json_error_before_the_model_is_called(
    serve: Callable[[Any], LiveServer], app: Any, authenticate: Any, aimock: Aimock, vision: Agent
) -> None:
    protocols: list[Literal["ndjson", "ag-ui", "vercel-ai"]] = ["ndjson", "ag-ui", "vercel-ai"]
    routes = [
        agent_routes(vision, path=f"/{p}", protocol=p, authenticate=authenticate, max_body_bytes=8_000_000)
        for p in protocols
    ]
    live = serve(app(*routes))
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        for protocol, what, body, says in BAD:
            refused = http.post(f"/{protocol}", json=body, headers=ALICE)
            assert refused.status_code == 400, (protocol, what, refused.text)
            assert refused.headers["content-type"] == "application/json", (protocol, what)
            error = refused.json()
            assert error["kind"] == "error" and says in error["message"], (protocol, what, error)
            assert "Traceback" not in refused.text and IMAGE[:40] not in error["message"], (protocol, what)
    assert model_calls(aimock) == []  # nothing ran on a refused prompt
