"""Prompts with images and per-session model / instructions (SPEC §14b), in one process on SQLite and memory.

An image reaches the model as image content (a fake OpenAI-compatible server's request journal shows it),
the store holds it as base64, and bad images, sizes and hooks are refused before anything is stored.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _media import JPEG_HEAD, png
from _services import Aimock
from conftest import LiveServer
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from ai_utils import Agent, StreamResponse, UserError, memory_sessions, sqlite_sessions
from ai_utils.client import iter_ndjson
from ai_utils.sessions import SessionStore
from ai_utils.testing import FakeChatModel, FunctionChatModel

RED = png(2, 2)
MIB = 1024 * 1024


@pytest.fixture
def store() -> Iterator[SessionStore]:
    sessions = memory_sessions()
    yield sessions
    sessions.close()  # type: ignore[attr-defined]


def _seeing() -> FunctionChatModel:
    def reply(messages: list[BaseMessage], tools: list[Any]) -> str:
        last = messages[-1]
        kinds = [b.get("type") for b in last.content] if isinstance(last.content, list) else ["str"]
        return f"saw {kinds}"

    return FunctionChatModel(reply)


def _turns(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as conn:
        return [json.loads(row[0]) for row in conn.execute("SELECT payload FROM ai_utils_turns ORDER BY seq")]


def test_an_image_prompt_is_stored_as_base64_and_reaches_the_model_as_image_content(tmp_path: Path) -> None:
    store = sqlite_sessions(tmp_path / "s.sqlite")
    try:
        model = _seeing()
        agent = Agent(llm=model, sessions=store)
        s = agent.session()
        jpeg = JPEG_HEAD + b"\x00" * 64
        blocks = [
            {"type": "text", "text": "What is in these?"},
            {"type": "image", "data": bytearray(RED), "mime_type": "image/png"},  # raw bytes
            {"type": "image", "data": base64.b64encode(RED).decode(), "mime_type": "image/png"},  # canonical base64
            {"type": "image_url", "url": "data:image/png;base64," + base64.b64encode(jpeg).decode()},  # mislabelled
        ]
        turn = s.prompt(blocks)
        # Accepted means stored, as JSON: the bytes are base64 in the row, the data URL's label is what the bytes are.
        stored = _turns(tmp_path / "s.sqlite")[0]["input"]
        assert stored == [
            {"type": "text", "text": "What is in these?"},
            {"type": "image", "data": base64.b64encode(RED).decode(), "mime_type": "image/png"},
            {"type": "image", "data": base64.b64encode(RED).decode(), "mime_type": "image/png"},
            {"type": "image", "data": base64.b64encode(jpeg).decode(), "mime_type": "image/jpeg"},
        ]
        assert turn.result().output == "saw ['text', 'image', 'image', 'image']"
        sent = model.calls[0][-1]
        assert isinstance(sent, HumanMessage) and isinstance(sent.content, list)
        assert sent.content[1] == {"type": "image", "base64": base64.b64encode(RED).decode(), "mime_type": "image/png"}
        assert s.history()[0].content == sent.content  # the thread keeps the same blocks
    finally:
        store.close()  # type: ignore[attr-defined]


def test_an_image_reaches_an_openai_compatible_server_as_an_image_url_part(
    aimock: Aimock, monkeypatch: pytest.MonkeyPatch, store: SessionStore
) -> None:
    monkeypatch.setenv("LOCAL_LLM_BASE_URL", aimock.openai_base_url)
    aimock.add({"match": {"userMessage": "Describe"}, "response": {"content": "A red square."}})
    agent = Agent(llm=FakeChatModel(["not this one"]), sessions=store)
    s = agent.session(model="local:vision-1", instructions="Answer in five words.")
    blocks = [{"type": "text", "text": "Describe it"}, {"type": "image", "data": RED, "mime_type": "image/png"}]
    assert s.prompt(blocks).result(timeout=60).output == "A red square."
    (body,) = [b for b in aimock.request_bodies() if "messages" in b]
    assert body["model"] == "vision-1"  # the session's model, resolved like get_llm("local", "vision-1")
    system, user = body["messages"][0], body["messages"][-1]
    assert system["role"] == "system" and "Answer in five words." in json.dumps(system["content"])
    assert user["content"] == [
        {"type": "text", "text": "Describe it"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(RED).decode()}},
    ]


@pytest.mark.parametrize(
    ("blocks", "match"),
    [
        ("not a list", None),  # a str is a plain prompt: accepted
        ([], "non-empty list"),
        ([{"type": "video", "url": "x"}], "'video'"),
        ([{"type": "text", "text": 3}], "not a str"),
        ([{"type": "image", "data": base64.b64encode(RED).decode() + "\n", "mime_type": "image/png"}], "canonical"),
        ([{"type": "image", "data": base64.encodebytes(png(40, 40)).decode(), "mime_type": "image/png"}], "canonical"),
        ([{"type": "image", "data": "not base64!", "mime_type": "image/png"}], "not valid base64"),
        ([{"type": "image", "data": RED}], "mime_type"),
        ([{"type": "image", "data": b"<html>hi</html>", "mime_type": "image/png"}], "not a PNG, JPEG, GIF or WebP"),
        ([{"type": "image", "data": RED, "mime_type": "image/jpeg"}], "its bytes are image/png"),
        ([{"type": "image_url", "url": "https://example.com/cat.png"}], "data URL"),
        ([{"type": "image_url", "url": "data:image/png,rawbytes"}], "not base64"),
        ([{"type": "image", "data": RED, "mime_type": "image/png"}] * 9, "more than 8 images"),
        ([{"type": "image", "data": png(padding=4 * MIB), "mime_type": "image/png"}], "at most 3.75 MiB"),
        ([{"type": "image", "data": png(padding=int(3.5 * MIB)), "mime_type": "image/png"}] * 2, "6 MiB together"),
    ],
)
def test_bad_prompt_content_is_refused_before_anything_is_stored(
    store: SessionStore, blocks: Any, match: str | None
) -> None:
    agent = Agent(llm=FakeChatModel(["ok"], cycle=True), sessions=store)
    s = agent.session()
    if match is None:
        assert s.prompt(blocks).result().output == "ok"
        return
    with pytest.raises(UserError, match=match):
        s.prompt(blocks)
    assert store.last_cursor(s.id) == 0 and not store.busy(s.id) and s.history() == []


def test_resize_image_runs_before_storing_and_a_failing_one_stores_nothing(tmp_path: Path) -> None:
    store = sqlite_sessions(tmp_path / "r.sqlite")
    seen: list[tuple[int, str]] = []

    def shrink(data: bytes, mime_type: str) -> tuple[bytes, str]:
        seen.append((len(data), mime_type))
        if data.startswith(b"BM"):  # a BMP: convert it
            return RED, "image/png"
        if b"explode" in data:
            raise ValueError("cannot decode this image")
        return png(1, 1), "image/png"

    try:
        agent = Agent(llm=_seeing(), sessions=store, resize_image=shrink)
        s = agent.session()
        big = png(padding=5 * MIB)  # too big without the hook
        bmp = b"BM" + b"\x00" * 100  # not an accepted format without the hook
        turn = s.prompt(
            [
                {"type": "image", "data": big, "mime_type": "image/png"},
                {"type": "image", "data": bmp, "mime_type": "image/bmp"},
            ]
        )
        assert turn.result().output == "saw ['image', 'image']"
        assert seen == [(len(big), "image/png"), (len(bmp), "image/bmp")]
        assert [b["data"] for b in _turns(tmp_path / "r.sqlite")[0]["input"]] == [
            base64.b64encode(png(1, 1)).decode(),
            base64.b64encode(RED).decode(),
        ]

        before = store.last_cursor(s.id)
        with pytest.raises(ValueError, match="cannot decode"):
            s.prompt([{"type": "image", "data": png(padding=10) + b"explode", "mime_type": "image/png"}])
        assert len(_turns(tmp_path / "r.sqlite")) == 1 and store.last_cursor(s.id) == before

        def bad_result(data: bytes, mime_type: str) -> Any:
            return "not a tuple"

        odd = Agent(llm=_seeing(), sessions=store, resize_image=bad_result, name="odd")
        with pytest.raises(UserError, match=r"\(bytes, mime_type\)"):
            odd.session().prompt([{"type": "image", "data": RED, "mime_type": "image/png"}])
    finally:
        store.close()  # type: ignore[attr-defined]


def test_an_image_url_block_in_openais_spelling_is_taken(store: SessionStore) -> None:
    model = _seeing()
    s = Agent(llm=model, sessions=store).session()
    url = "data:image/png;base64," + base64.b64encode(RED).decode()
    blocks = [{"type": "text", "text": "and this?"}, {"type": "image_url", "image_url": {"url": url}}]
    assert s.prompt(blocks).result().output == "saw ['text', 'image']"
    with pytest.raises(UserError, match=r"input\[0\] needs `url` as a data URL .*got None"):
        s.prompt([{"type": "image_url"}])


def test_an_image_resize_image_returns_badly_is_blamed_on_the_hook(store: SessionStore) -> None:
    def to_jpeg(data: bytes, mime_type: str) -> tuple[bytes, str]:
        return JPEG_HEAD + b"\x00" * 16, "image/png"  # says PNG, is JPEG

    def to_huge(data: bytes, mime_type: str) -> tuple[bytes, str]:
        return png(padding=4 * MIB), "image/png"

    block = {"type": "image", "data": RED, "mime_type": "image/png"}
    s = Agent(llm=_seeing(), sessions=store, resize_image=to_jpeg, name="jpeg").session()
    with pytest.raises(UserError, match=r"input\[0\] as resize_image returned it .* return mime_type='image/jpeg'"):
        s.prompt([block])
    s = Agent(llm=_seeing(), sessions=store, resize_image=to_huge, name="huge").session()
    with pytest.raises(UserError, match="as resize_image returned it is 4.00 MiB; .* make resize_image return"):
        s.prompt([block])
    assert store.last_cursor(s.id) == 0


async def test_a_sync_prompt_with_an_async_resize_image_inside_a_loop_names_aprompt(store: SessionStore) -> None:
    awaited: list[int] = []

    async def shrink(data: bytes, mime_type: str) -> tuple[bytes, str]:
        awaited.append(1)
        return RED, "image/png"

    s = Agent(llm=_seeing(), sessions=store, resize_image=shrink).session()
    block = {"type": "image", "data": RED, "mime_type": "image/png"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine 'shrink' was never awaited" left behind
        with pytest.raises(UserError, match=r"await session\.aprompt"):
            s.prompt([block])
        gc.collect()
    assert not awaited and store.last_cursor(s.id) == 0
    assert (await (await s.aprompt([block])).aresult()).output == "saw ['image']"


async def test_an_async_resize_image_is_awaited_by_aprompt(store: SessionStore) -> None:
    async def shrink(data: bytes, mime_type: str) -> tuple[bytes, str]:
        await asyncio.sleep(0)
        return png(1, 1), "image/png"

    agent = Agent(llm=_seeing(), sessions=store, resize_image=shrink)
    turn = await agent.session().aprompt([{"type": "image", "data": png(padding=5 * MIB), "mime_type": "image/png"}])
    assert (await turn.aresult()).output == "saw ['image']"


def test_session_model_and_instructions_are_stored_with_the_session(store: SessionStore) -> None:
    systems: list[str] = []

    def reply(messages: list[BaseMessage], tools: list[Any]) -> str:
        systems.append(next((m.text for m in messages if isinstance(m, SystemMessage)), ""))
        return "ok"

    agent = Agent(llm=FunctionChatModel(reply), prompt="You are terse.", sessions=store, name="writer")
    s = agent.session("doc-1", instructions="Write in German.")
    assert s.prompt("Hi").result().output == "ok"
    # Any later opening (any process) uses what the session was created with.
    assert agent.session("doc-1").prompt("Again").result().output == "ok"
    assert systems == ["You are terse.\n\nWrite in German.", "You are terse.\n\nWrite in German."]
    agent.session("doc-1", instructions="Write in German.")  # the same value is fine

    with pytest.raises(UserError, match="instructions"):
        agent.session("doc-1", instructions="Write in French.")
    with pytest.raises(UserError, match="model=None"):
        agent.session("doc-1", model="openai:gpt-4o-mini")
    with pytest.raises(UserError, match="64 KiB"):
        agent.session(instructions="x" * (64 * 1024 + 1))
    with pytest.raises(UserError, match="must be a str"):
        agent.session(instructions=42)  # type: ignore[arg-type]
    for model in ("gpt-4o-mini", ":x", "openai:", 7):
        with pytest.raises(UserError, match="'provider:model'"):
            agent.session(model=model)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="nope"):
        agent.session(model="nope:model")
    with pytest.raises(UserError, match="sessions="):
        Agent(llm=FakeChatModel(["x"]), resize_image=lambda d, m: (d, m))
    with pytest.raises(UserError, match="resize_image"):
        Agent(llm=FakeChatModel(["x"]), sessions=store, resize_image="small")  # type: ignore[arg-type]


def test_stream_response_of_a_turn_names_its_session_in_the_first_line(
    serve: Callable[[Any], LiveServer], store: SessionStore
) -> None:
    agent = Agent(llm=FakeChatModel(["Hello there."], cycle=True), sessions=store)

    async def chat(request: Request) -> StreamResponse:
        body = await request.json()
        turn = await agent.session(body.get("session_id")).aprompt(body["text"])
        return StreamResponse(turn)

    server = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])]))
    with httpx.stream("POST", f"{server.base_url}/chat", json={"text": "Hi"}, timeout=30) as response:
        chunks = list(iter_ndjson(response.iter_lines()))
    first = chunks[0]
    assert isinstance(first, dict) and first["kind"] == "turn_start"
    assert set(first) == {"kind", "turn_id", "session_id", "message_id"}
    assert chunks[1:-1] == ["Hello ", "there."] and chunks[-1]["kind"] == "turn_end"  # type: ignore[index]
    # The browser learned its session id from that line: the next request continues the session.
    with httpx.stream(
        "POST", f"{server.base_url}/chat", json={"text": "Again", "session_id": first["session_id"]}, timeout=30
    ) as response:
        again = list(iter_ndjson(response.iter_lines()))
    assert again[0]["session_id"] == first["session_id"]  # type: ignore[index]
    assert len(agent.session(first["session_id"]).history()) == 4  # type: ignore[index]
