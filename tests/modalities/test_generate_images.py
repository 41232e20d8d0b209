"""generate_images(): OpenRouter chat completions with image output, against the local OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path

import pytest
from modalities._images import JPEG, data_url, png

from ai_utils import AiUtilsError, GeneratedImage, ProviderError, UserError, agenerate_images, generate_images
from ai_utils.modalities import DEFAULT_IMAGE_MODEL
from ai_utils.testing import FakeOpenAIServer


@pytest.fixture(autouse=True)
def _no_image_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AI_UTILS_IMAGE_MODEL", raising=False)


def test_one_image_is_decoded_and_image_config_is_sent_unchanged(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    image = png(4, 4)
    openai_server.reply("Here is your hero image.", images=[image])
    config = {"aspect_ratio": "16:9", "image_size": "2K"}

    images = generate_images(
        "Generate a clean product hero image",
        image_config=config,
        base_url=openai_server.url,
        api_key="fake-openai-key",
    )

    assert images == [GeneratedImage(data=image, mime_type="image/png", url=data_url("image/png", image))]
    assert repr(images[0]) == f"GeneratedImage(mime_type='image/png', {len(image)} bytes)"
    (request,) = openai_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer fake-openai-key"
    assert request.body == {
        "model": DEFAULT_IMAGE_MODEL,
        "messages": [{"role": "user", "content": "Generate a clean product hero image"}],
        "modalities": ["image", "text"],
        "image_config": config,
    }
    # The next step: save it and read it back.
    saved = images[0].save(tmp_path / "hero.png")
    assert saved.read_bytes() == image


async def test_two_images_with_env_wiring_data_safe_and_the_image_model_env(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "fake-openai-key")
    monkeypatch.setenv("OPENROUTER_BASE_URL", openai_server.url)
    monkeypatch.setenv("AI_UTILS_IMAGE_MODEL", "acme/image-1")
    first, second = png(2, 2), JPEG
    openai_server.reply("Two variants.", images=[first, second], times=1)

    images = await agenerate_images("Two logo variants", data_safe=True)

    assert [(i.mime_type, i.data) for i in images] == [("image/png", first), ("image/jpeg", second)]
    body = openai_server.requests[0].body
    assert body["model"] == "acme/image-1"
    assert body["provider"] == {"data_collection": "deny", "zdr": True}
    assert "image_config" not in body

    # An explicit model wins over the env.
    openai_server.reply("One more.", images=[first])
    (again,) = await agenerate_images("Another one", model="acme/image-2")
    assert again.data == first
    assert openai_server.requests[1].body["model"] == "acme/image-2"


def test_a_reply_without_images_raises_quoting_the_text(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply("Sorry, I can only describe images in words.")

    with pytest.raises(AiUtilsError, match="answered without an image; it said: 'Sorry, I can only describe") as raised:
        generate_images("A cat", base_url=openai_server.url, api_key="fake-openai-key")

    assert not isinstance(raised.value, UserError | ProviderError)
    assert "fake-openai-key" not in str(raised.value)


def test_missing_key_http_errors_and_unreachable_servers(openai_server: FakeOpenAIServer) -> None:
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        generate_images("A cat", base_url=openai_server.url)
    with pytest.raises(UserError, match="image_config"):
        generate_images("A cat", image_config="16:9", api_key="k", base_url=openai_server.url)  # type: ignore[arg-type]
    assert openai_server.requests == []

    openai_server.fail(503)
    with pytest.raises(ProviderError, match="answered 503 for image model") as raised:
        generate_images("A cat", base_url=openai_server.url, api_key="fake-openai-key")
    assert raised.value.provider == "openrouter"
    with pytest.raises(ProviderError, match="answered 401"):
        generate_images("A cat", base_url=openai_server.url, api_key="sk-wrong-key")

    openai_server.reply("Broken.", images=["https://cdn.example.com/cat.png"])
    with pytest.raises(ProviderError, match="not a base64 data URL"):
        generate_images("A cat", base_url=openai_server.url, api_key="fake-openai-key")

    port = openai_server.port
    openai_server.stop()
    with pytest.raises(ProviderError, match=f"Could not reach http://127.0.0.1:{port}/v1/chat/completions"):
        generate_images("A cat", base_url=f"http://127.0.0.1:{port}/v1", api_key="fake-openai-key")
