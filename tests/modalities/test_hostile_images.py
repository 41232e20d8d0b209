"""A broken or hostile provider's images, and data URLs whose body is broken past their first characters.

`generate_images` reads the type from the bytes, never from the provider's label; `vision` checks a data URL's
whole base64 payload. Each test first shows the attack, then that it is refused (or corrected).
"""

from __future__ import annotations

import base64

import pytest
from modalities._images import GIF, JPEG, data_url, png

from ai_utils import GeneratedImage, ProviderError, UserError, generate_images, get_llm, vision
from ai_utils.testing import FakeOpenAIServer

HTML = b"<!doctype html><html><script>alert(1)</script></html>"


def _generate(server: FakeOpenAIServer) -> list[GeneratedImage]:
    return generate_images("a cat", base_url=server.url, api_key="fake-openai-key")


@pytest.mark.parametrize("label", ["image/png", "image/jpeg", "image/svg+xml", "text/html"])
def test_an_html_body_labelled_as_an_image_is_refused(openai_server: FakeOpenAIServer, label: str) -> None:
    openai_server.reply("Here.", images=[data_url(label, HTML)])
    with pytest.raises(ProviderError, match="not a PNG, JPEG, GIF or WebP image") as info:
        _generate(openai_server)
    assert "<script>" not in str(info.value)  # the body's head is quoted as bytes, shortened


@pytest.mark.parametrize(
    ("label", "image", "real"),
    [
        ("image/../../x", png(2, 2), "image/png"),
        ("image/png", JPEG, "image/jpeg"),
        ("application/octet-stream", GIF, "image/gif"),
    ],
)
def test_the_mime_type_is_what_the_bytes_are_not_the_label(
    openai_server: FakeOpenAIServer, label: str, image: bytes, real: str
) -> None:
    openai_server.reply("Here.", images=[data_url(label, image)])
    [generated] = _generate(openai_server)
    assert generated.mime_type == real
    assert generated.data == image
    assert generated.url == data_url(real, image)  # the URL a caller may embed carries the real type too


def test_vision_checks_the_whole_base64_payload_not_its_head(openai_server: FakeOpenAIServer) -> None:
    good = data_url("image/png", png(8, 8))
    broken = good[:80] + "!!not base64!!" + good[80:]
    # The attack: the first 16 characters decode to a real PNG signature.
    assert base64.b64decode(broken.partition(",")[2][:16], validate=True).startswith(b"\x89PNG")
    openai_server.reply("A tiny image.")
    with pytest.raises(UserError, match="not valid base64"):
        vision("What is this?", broken, llm=get_llm("local", base_url=openai_server.url))
    assert openai_server.requests == []  # refused before any request


def test_plain_base64_with_a_valid_head_and_a_broken_body_is_refused() -> None:
    from ai_utils._images import base64_image

    text = base64.b64encode(png(8, 8)).decode()
    with pytest.raises(UserError, match="neither base64 image data"):
        base64_image(text[:40] + "%%%" + text[40:])
    assert base64_image(text)[0] == "image/png"
