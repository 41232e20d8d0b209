"""vision(): images of every kind become OpenAI-style image_url parts, checked by content, over real HTTP."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from modalities._images import GIF, JPEG, WEBP, data_url, png

from ai_utils import UserError, avision, get_llm, vision
from ai_utils.testing import FakeOpenAIServer


def local_llm(server: FakeOpenAIServer) -> Any:
    return get_llm("local", "fake-vision", base_url=server.url, api_key=server.api_key)


def sent_parts(server: FakeOpenAIServer, index: int = -1) -> list[dict[str, Any]]:
    (message,) = server.requests[index].body["messages"]
    assert message["role"] == "user"
    parts: list[dict[str, Any]] = message["content"]
    return parts


def test_urls_paths_bytes_and_data_urls_of_each_format(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    openai_server.reply("  A cat next to a chart.  ")
    image = png()
    (tmp_path / "chart.png").write_bytes(image)
    (tmp_path / "photo.webp").write_bytes(WEBP)
    gif_url = data_url("image/gif", GIF)

    answer = vision(
        "What is in these pictures?",
        ["https://example.com/cat.jpg", tmp_path / "chart.png", JPEG, gif_url, str(tmp_path / "photo.webp")],
        llm=local_llm(openai_server),
    )

    assert answer == "A cat next to a chart."
    text, *images = sent_parts(openai_server)
    assert text == {"type": "text", "text": "What is in these pictures?"}
    assert [part["type"] for part in images] == ["image_url"] * 5
    assert [part["image_url"]["detail"] for part in images] == ["auto"] * 5
    urls = [part["image_url"]["url"] for part in images]
    assert urls[0] == "https://example.com/cat.jpg"  # URLs pass through; the provider fetches them
    assert urls[1] == data_url("image/png", image)
    assert urls[2] == data_url("image/jpeg", JPEG)
    assert urls[3] == gif_url
    assert urls[4] == data_url("image/webp", WEBP)
    assert base64.b64decode(urls[1].split(",", 1)[1]) == image

    # A follow-up question about one of them works the same way.
    openai_server.reply("Three bars.", when="How many bars")
    assert vision("How many bars?", tmp_path / "chart.png", llm=local_llm(openai_server)) == "Three bars."
    assert sent_parts(openai_server)[1]["image_url"]["url"] == data_url("image/png", image)


def test_a_large_image_is_the_exact_base64_of_its_bytes(openai_server: FakeOpenAIServer) -> None:
    # Larger than one 48 KB encoding step and not a multiple of it: the steps join with no padding between.
    image = png(300, 200, noise=bytes(range(251)) * 800)
    as_ints = memoryview(bytearray(image + b"\0" * (-len(image) % 4))).cast("I")  # a view of 4-byte items
    llm = local_llm(openai_server)

    larger = png(400, 300, noise=bytes(range(7, 256)) * 1500)  # then a smaller one: no bytes of the larger one stay

    vision("Describe.", [image, bytearray(image), memoryview(image), as_ints, larger, image], llm=llm)

    urls = [part["image_url"]["url"] for part in sent_parts(openai_server)[1:]]
    assert urls[:3] == [data_url("image/png", image)] * 3
    assert urls[3] == data_url("image/png", as_ints.tobytes())
    assert urls[4:] == [data_url("image/png", larger), data_url("image/png", image)]
    assert base64.b64decode(urls[0].split(",", 1)[1], validate=True) == image


def test_the_content_decides_the_type_not_the_name_or_label(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    image = png()
    (tmp_path / "photo.jpg").write_bytes(image)  # a PNG saved with a .jpg name
    (tmp_path / "notes.png").write_text("just some text, not an image")
    mislabelled = data_url("image/jpeg", image)
    llm = local_llm(openai_server)

    vision("Describe.", [tmp_path / "photo.jpg", mislabelled, image], llm=llm)

    urls = [part["image_url"]["url"] for part in sent_parts(openai_server)[1:]]
    assert urls == [data_url("image/png", image)] * 3

    with pytest.raises(UserError, match=r"images\[1\] \(notes\.png\) is not a PNG, JPEG, GIF or WebP image") as bad:
        vision("Describe.", [image, tmp_path / "notes.png"], llm=llm)
    assert "b'just som'" in str(bad.value)
    with pytest.raises(UserError, match=r"images\[0\] is not a PNG, JPEG, GIF or WebP image"):
        vision("Describe.", [b"%PDF-1.7 a pdf"], llm=llm)
    with pytest.raises(UserError, match=r"images\[0\] is not a PNG"):
        vision("Describe.", [data_url("image/png", b"<svg xmlns='http://www.w3.org/2000/svg'/>")], llm=llm)
    assert len(openai_server.requests) == 1  # none of the bad calls reached the model


def test_bad_arguments_fail_before_any_request(
    openai_server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = local_llm(openai_server)
    # A relative path: the message shortens values past 80 characters, and tmp_path's length depends on the runner.
    monkeypatch.chdir(tmp_path)

    with pytest.raises(UserError, match=r"images\[0\] 'missing\.png' is not an http\(s\) URL, a data: URL or an"):
        vision("Describe.", [Path("missing.png")], llm=llm)
    with pytest.raises(UserError, match="data URL that is not base64"):
        vision("Describe.", ["data:image/png,%89PNG"], llm=llm)
    with pytest.raises(UserError, match="payload is not valid base64"):
        vision("Describe.", ["data:image/png;base64,!!!!not-base64!!!!"], llm=llm)
    with pytest.raises(UserError, match=r"images\[0\] is a int"):
        vision("Describe.", [42], llm=llm)  # type: ignore[list-item]
    with pytest.raises(UserError, match="non-empty list of images"):
        vision("Describe.", [], llm=llm)
    with pytest.raises(UserError, match="Unknown detail 'ultra'"):
        vision("Describe.", [GIF], llm=llm, detail="ultra")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="non-empty prompt"):
        vision("  ", [GIF], llm=llm)
    assert openai_server.requests == []


async def test_avision_uses_get_llms_default_model_and_passes_detail(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", openai_server.api_key or "")
    monkeypatch.setenv("OPENROUTER_BASE_URL", openai_server.url)
    openai_server.reply("A small animated GIF.")

    answer = await avision("What is this?", GIF, detail="low")

    assert answer == "A small animated GIF."
    (request,) = openai_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "openai/gpt-5.6-luna"
    assert request.headers["authorization"] == f"Bearer {openai_server.api_key}"
    assert sent_parts(openai_server)[1] == {
        "type": "image_url",
        "image_url": {"url": data_url("image/gif", GIF), "detail": "low"},
    }
