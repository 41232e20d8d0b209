"""`generate_images()` / `agenerate_images()`: images from OpenRouter's image models (chat completions).

OpenRouter answers a chat completion with ``modalities: ["image", "text"]`` with the images as base64
data URLs in ``choices[0].message.images``. `ChatOpenAI` drops that field, so this module posts the
request itself with httpx; key, base URL and ``data_safe`` come from `get_llm`'s OpenRouter wiring.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import httpx

from ai_utils._images import sniff
from ai_utils.exceptions import AiUtilsError, ProviderError, UserError
from ai_utils.llm._factory import _api_key, _base_url, _openrouter_extra_body

__all__ = ["DEFAULT_IMAGE_MODEL", "GeneratedImage", "agenerate_images", "generate_images"]

DEFAULT_IMAGE_MODEL: Final = "google/gemini-2.5-flash-image"
"""OpenRouter's Gemini image model ("Nano Banana"); ``AI_UTILS_IMAGE_MODEL`` overrides it."""
_TIMEOUT: Final = httpx.Timeout(180.0, connect=15.0)  # image models often take a minute


@dataclasses.dataclass(frozen=True)
class GeneratedImage:
    """One generated image.

    Attributes:
        data: the decoded image bytes.
        mime_type: e.g. ``"image/png"``.
        url: the data URL the model sent.
    """

    data: bytes = dataclasses.field(repr=False)
    mime_type: str
    url: str = dataclasses.field(repr=False)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the image bytes to ``path`` and return it as a `Path`."""
        target = Path(path)
        target.write_bytes(self.data)
        return target

    def __repr__(self) -> str:
        return f"GeneratedImage(mime_type={self.mime_type!r}, {len(self.data)} bytes)"


@dataclasses.dataclass(frozen=True)
class _Call:
    model: str
    url: str
    headers: dict[str, str] = dataclasses.field(repr=False)
    body: dict[str, Any]


def _call(
    prompt: str,
    *,
    model: str | None,
    image_config: Mapping[str, Any] | None,
    api_key: str | None,
    base_url: str | None,
    data_safe: bool,
) -> _Call:
    if not isinstance(prompt, str) or not prompt.strip():
        raise UserError(f"generate_images() needs a non-empty prompt, got {prompt!r}.")
    if image_config is not None and not isinstance(image_config, Mapping):
        raise UserError(f"`image_config` must be a dict such as {{'aspect_ratio': '16:9'}}, got {image_config!r}.")
    chosen = model or os.environ.get("AI_UTILS_IMAGE_MODEL") or DEFAULT_IMAGE_MODEL
    key = _api_key("openrouter", api_key)
    root = _base_url("openrouter", base_url).rstrip("/")
    body: dict[str, Any] = {
        "model": chosen,
        "messages": [{"role": "user", "content": prompt}],
        "modalities": ["image", "text"],
        **(_openrouter_extra_body(None, reasoning=None, data_safe=data_safe) or {}),
    }
    if image_config is not None:
        body["image_config"] = dict(image_config)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Accept": "application/json"}
    return _Call(chosen, f"{root}/chat/completions", headers, body)


def _decode(url: str, model: str) -> GeneratedImage:
    header, comma, payload = url.partition(",")
    if not (url.startswith("data:") and comma and header.endswith(";base64")):
        raise ProviderError(
            f"The image model {model!r} sent an image that is not a base64 data URL ({url[:60]!r}).",
            provider="openrouter",
        )
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProviderError(f"The image model {model!r} sent invalid base64 ({exc}).", provider="openrouter") from exc
    # The type is what the bytes are, never the provider's label (an HTML page labelled image/png, a label like
    # ``image/../../x`` that a caller might use as a file extension): checked like vision's inputs.
    mime = sniff(data)
    if mime is None:
        raise ProviderError(
            f"The image model {model!r} sent data labelled {header[len('data:') :][:40]!r} that is not a PNG, JPEG, "
            f"GIF or WebP image (it starts with {data[:8]!r}). The provider's reply is broken; try again or another "
            "model.",
            provider="openrouter",
        )
    if header[len("data:") :].split(";", 1)[0].lower() != mime:
        url = f"data:{mime};base64,{payload}"
    return GeneratedImage(data=data, mime_type=mime, url=url)


def _unreachable(call: _Call, exc: Exception) -> ProviderError:
    return ProviderError(
        f"Could not reach {call.url} for image model {call.model!r} ({type(exc).__name__}: {exc}). "
        "Check `base_url` / OPENROUTER_BASE_URL and the network.",
        provider="openrouter",
    )


def _images(call: _Call, response: httpx.Response) -> list[GeneratedImage]:
    if not response.is_success:
        raise ProviderError(
            f"OpenRouter answered {response.status_code} for image model {call.model!r}: {response.text[:500]}",
            provider="openrouter",
        )
    try:
        message = response.json()["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ProviderError(
            f"OpenRouter sent a reply without choices[0].message for {call.model!r}: {response.text[:300]!r}",
            provider="openrouter",
        ) from exc
    parts = message.get("images") or []
    urls = [
        part["image_url"]["url"]
        for part in parts
        if isinstance(part, Mapping) and isinstance(part.get("image_url"), Mapping) and "url" in part["image_url"]
    ]
    if not urls:
        text = message.get("content") or ""
        raise AiUtilsError(
            f"The image model {call.model!r} answered without an image; it said: {str(text)[:1000]!r}. "
            "Rephrase the prompt, or pick an image model (model= or AI_UTILS_IMAGE_MODEL)."
        )
    return [_decode(url, call.model) for url in urls]


def generate_images(
    prompt: str,
    *,
    model: str | None = None,
    image_config: Mapping[str, Any] | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    data_safe: bool = False,
) -> list[GeneratedImage]:
    """Generate images from a prompt with an OpenRouter image model.

    Example:
        ```python
        [image] = generate_images("A clean product hero image", image_config={"aspect_ratio": "16:9"})
        image.save("hero.png")
        ```

    Args:
        prompt: what to draw.
        model: an OpenRouter model with image output; default ``AI_UTILS_IMAGE_MODEL``, else
            ``google/gemini-2.5-flash-image``.
        image_config: sent unchanged as ``image_config``, e.g. ``{"aspect_ratio": "16:9", "image_size": "2K"}``.
        api_key: default ``OPENROUTER_API_KEY``.
        base_url: the API root; default ``OPENROUTER_BASE_URL`` or ``https://openrouter.ai/api/v1``
            (requests go to ``{base_url}/chat/completions``).
        data_safe: route only to providers that neither collect nor retain data, as in `get_llm`.

    Returns:
        The images the model sent, decoded.

    Raises:
        UserError: no API key, an empty prompt, or an ``image_config`` that is not a dict.
        AiUtilsError: the model answered with text only (the message quotes it).
        ProviderError: a non-2xx reply, an unreachable server or a malformed image.
    """
    call = _call(
        prompt, model=model, image_config=image_config, api_key=api_key, base_url=base_url, data_safe=data_safe
    )
    try:
        with httpx.Client(timeout=_TIMEOUT) as client:
            response = client.post(call.url, headers=call.headers, json=call.body)
    except httpx.TransportError as exc:
        raise _unreachable(call, exc) from exc
    return _images(call, response)


async def agenerate_images(
    prompt: str,
    *,
    model: str | None = None,
    image_config: Mapping[str, Any] | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    data_safe: bool = False,
) -> list[GeneratedImage]:
    """Async twin of `generate_images`; cancelling the task aborts the request."""
    call = _call(
        prompt, model=model, image_config=image_config, api_key=api_key, base_url=base_url, data_safe=data_safe
    )
    try:
        async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
            response = await client.post(call.url, headers=call.headers, json=call.body)
    except httpx.TransportError as exc:
        raise _unreachable(call, exc) from exc
    return _images(call, response)
