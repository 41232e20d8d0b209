"""Prompts with content blocks: text and images, checked by content and stored as JSON before they are accepted.

``s.prompt(input)`` takes a ``str`` or a list of blocks: ``{"type": "text", "text"}``, ``{"type": "image",
"data": <canonical base64 str> | bytes, "mime_type"}`` and ``{"type": "image_url", "url": "data:image/...;
base64,..."}``. Images are decoded, passed through the agent's ``resize_image`` hook when it has one, then
checked: PNG, JPEG, GIF or WebP by their bytes (`ai_utils.modalities._images.sniff`, the check `vision`
uses), at most 8 per prompt, 3.75 MiB each and 6 MiB together. What is stored (and what every process
that runs the turn sends) is ``[{"type": "text", "text"}, {"type": "image", "data": <base64>, "mime_type"}]``;
the model gets LangChain's standard content blocks, which each provider package turns into its own image
format.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias, cast

from ai_utils._images import sniff
from ai_utils.exceptions import UserError
from ai_utils.memory._methods import Flow, Step, twins
from ai_utils.sessions._schema import shown

__all__ = [
    "MAX_IMAGES",
    "MAX_IMAGES_BYTES",
    "MAX_IMAGE_BYTES",
    "ImageResizer",
    "Parsed",
    "ahuman_content",
    "check_resizer",
    "message_content",
    "parse",
    "prepare",
]

MAX_IMAGES = 8
MAX_IMAGE_BYTES = 3 * 1024 * 1024 + 768 * 1024  # 3.75 MiB
MAX_IMAGES_BYTES = 6 * 1024 * 1024

ImageResizer: TypeAlias = Callable[[bytes, str], "tuple[bytes, str] | Awaitable[tuple[bytes, str]]"]
"""``resize_image(data, mime_type) -> (data, mime_type)``, sync or async: runs on every prompt image before it is
stored (downscale, convert)."""

_FIX = "pass PNG, JPEG, GIF or WebP images (give the agent `resize_image=` to downscale or convert them)"
# The same advice for an image the agent's own resize_image returned (the caller's image was fine to start with).
_FIX_HOOK = "make resize_image return a PNG, JPEG, GIF or WebP image within the limits"

# One parsed block: ("text", text) or ("image", data, declared mime type, where).
Parsed: TypeAlias = list[tuple[Any, ...]]


def check_resizer(fn: Any, owner: str) -> ImageResizer | None:
    """``resize_image`` when it is callable (or ``None``), else `UserError`."""
    if fn is not None and not callable(fn):
        raise UserError(
            f"{owner}(resize_image=...) must be a function `(data: bytes, mime_type: str) -> (bytes, mime_type)`, "
            f"got {fn!r}."
        )
    return cast("ImageResizer | None", fn)


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.2f} MiB"


def _b64(value: str, where: str) -> bytes:
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UserError(f"{where} is not valid base64 ({exc}); pass canonical base64 or the raw bytes.") from exc
    # Canonical: what b64encode gives (padding, no whitespace or line breaks, zero pad bits), so the stored
    # form and what the provider receives are the caller's bytes exactly.
    if base64.b64encode(data).decode("ascii") != value:
        raise UserError(
            f"{where} is not canonical base64 (line breaks, missing padding or stray bits); "
            "pass base64.b64encode(data).decode() or the raw bytes."
        )
    return data


def _image(block: Mapping[str, Any], where: str) -> tuple[bytes, str]:
    data = block.get("data")
    mime = block.get("mime_type")
    if not isinstance(mime, str) or not mime:
        raise UserError(f"{where} needs a `mime_type` (e.g. 'image/png') next to its `data`.")
    if isinstance(data, str):
        return _b64(data, f"{where}.data"), mime
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data), mime  # a copy: the caller may reuse its buffer
    raise UserError(f"{where}.data must be canonical base64 (str) or bytes, got {type(data).__name__}.")


def _data_url(block: Mapping[str, Any], where: str) -> tuple[bytes, str]:
    url = block.get("url")
    if url is None:  # OpenAI's spelling: {"type": "image_url", "image_url": {"url": ...}}
        url = block.get("image_url")
    if isinstance(url, Mapping):
        url = url.get("url")
    if not isinstance(url, str) or not url[:5].lower() == "data:":
        raise UserError(
            f"{where} needs `url` as a data URL ('data:image/png;base64,...'), got {shown(url)}; a prompt is "
            "stored with its images, so download a web image and pass its bytes."
        )
    header, comma, payload = url.partition(",")
    if not comma or not header.lower().endswith(";base64"):
        raise UserError(f"{where} is a data URL that is not base64 ({header[:40]!r}); use data:image/...;base64,...")
    data = _b64(payload, f"{where}.url")
    # The label does not count (as in `vision`): the bytes say what the image is.
    return data, sniff(data) or header[5:].split(";", 1)[0]


def parse(input: Any) -> str | Parsed:
    """The prompt as given: a ``str``, or its blocks decoded (images as bytes); `UserError` for a bad shape."""
    if isinstance(input, str):
        return input
    if not isinstance(input, Sequence) or isinstance(input, bytes | bytearray) or not input:
        raise UserError(
            f"prompt(input=...) must be a str or a non-empty list of content blocks ({{'type': 'text', 'text': ...}}, "
            f"{{'type': 'image', 'data': ..., 'mime_type': ...}}, {{'type': 'image_url', 'url': 'data:...'}}), "
            f"got {type(input).__name__}."
        )
    parsed: Parsed = []
    images = 0
    for i, block in enumerate(input):
        where = f"input[{i}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise UserError(f"{where} is a text block whose `text` is not a str: {shown(text)}.")
            parsed.append(("text", text))
            continue
        if kind == "image":
            data, mime = _image(block, where)
        elif kind == "image_url":
            data, mime = _data_url(block, where)
        else:
            raise UserError(
                f"{where} has type {shown(kind)}; a prompt block is 'text', 'image' or 'image_url' "
                "(a dict with `type`)."
            )
        images += 1
        if images > MAX_IMAGES:
            raise UserError(f"The prompt has more than {MAX_IMAGES} images; send at most {MAX_IMAGES} per prompt.")
        parsed.append(("image", data, mime, where))
    return parsed


def _resized(result: Any, where: str) -> tuple[bytes, str]:
    if (
        not isinstance(result, tuple)
        or len(result) != 2
        or not isinstance(result[0], bytes | bytearray | memoryview)
        or not isinstance(result[1], str)
    ):
        raise UserError(
            f"resize_image returned {type(result).__name__} for {where}; it must return (bytes, mime_type)."
        )
    return bytes(result[0]), result[1]


def _checked(parsed: Parsed, *, hooked: bool = False) -> list[dict[str, Any]]:
    """The stored blocks; `UserError` for an image that is not one or too much data.

    ``hooked``: the images are what the agent's ``resize_image`` returned, so the advice is about the hook.
    """
    fix = _FIX_HOOK if hooked else _FIX
    stored: list[dict[str, Any]] = []
    total = 0
    for item in parsed:
        if item[0] == "text":
            stored.append({"type": "text", "text": item[1]})
            continue
        _, data, mime, where = item
        if hooked:
            where = f"{where} as resize_image returned it"
        found = sniff(data)
        if found is None:
            raise UserError(f"{where} is not a PNG, JPEG, GIF or WebP image (it starts with {data[:8]!r}); {fix}.")
        if mime.lower() != found:
            to = "return" if hooked else "pass"
            raise UserError(
                f"{where} says mime_type {shown(mime)} but its bytes are {found}; {to} mime_type={found!r}."
            )
        if len(data) > MAX_IMAGE_BYTES:
            raise UserError(f"{where} is {_mib(len(data))}; an image may have at most 3.75 MiB, so {fix}.")
        total += len(data)
        if total > MAX_IMAGES_BYTES:
            raise UserError(f"The prompt's images have more than 6 MiB together ({_mib(total)} so far); {fix}.")
        stored.append({"type": "image", "data": base64.b64encode(data).decode("ascii"), "mime_type": found})
    return stored


def _resize_sync(fn: ImageResizer, data: bytes, mime: str) -> Any:
    result = fn(data, mime)
    if inspect.isawaitable(result):
        from ai_utils._utils import run_sync

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_sync(_awaited(result), what="prompt() with an async resize_image")
        close = getattr(result, "close", None)
        if callable(close):
            close()  # never awaited: closed, so Python does not warn about it later
        raise UserError(
            "prompt() cannot await the agent's async resize_image inside a running event loop (Jupyter, FastAPI, "
            "async code); use `await session.aprompt(...)` there."
        )
    return result


async def _resize_async(fn: ImageResizer, data: bytes, mime: str) -> Any:
    result = fn(data, mime)
    return await result if inspect.isawaitable(result) else result


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def prepare(input: Any, resize: ImageResizer | None) -> Flow[Any]:
    """What a prompt stores: the ``str``, or its blocks with images resized, checked and base64-encoded.

    A `twins` body: the ``resize_image`` hook (sync or async) is a step, awaited on the caller's loop in
    ``aprompt``.

    Raises:
        UserError: a bad block, an image that is not PNG/JPEG/GIF/WebP, too many or too large images; what the
            hook raises propagates (nothing is stored).
    """
    parsed = parse(input)
    if isinstance(parsed, str):
        return parsed
    if resize is not None:
        for i, item in enumerate(parsed):
            if item[0] == "image":
                result = yield Step(_resize_sync, _resize_async, (resize, item[1], item[2]))
                parsed[i] = ("image", *_resized(result, item[3]), item[3])
    return _checked(parsed, hooked=resize is not None)


def message_content(stored: Any) -> str | list[str | dict[str, Any]]:
    """A stored prompt as a `HumanMessage`'s content (LangChain standard blocks for images)."""
    if isinstance(stored, str):
        return stored
    if not isinstance(stored, list):
        return str(stored)
    content: list[str | dict[str, Any]] = []
    for block in stored:
        if isinstance(block, Mapping) and block.get("type") == "image":
            content.append({"type": "image", "base64": block["data"], "mime_type": block["mime_type"]})
        elif isinstance(block, Mapping):
            content.append({"type": "text", "text": str(block.get("text", ""))})
    return content


_, _aprepared = twins(prepare, "prepared")


async def ahuman_content(input: Any, resize: ImageResizer | None) -> str | list[str | dict[str, Any]]:
    """A prompt (a ``str`` or content blocks) checked as a session checks it, as a `HumanMessage`'s content.

    For an agent run that stores no prompt of its own (``agent_routes``): the same checks and the same blocks the
    model gets from a session turn.

    Raises:
        UserError: as for `prepare`.
    """
    return message_content(await _aprepared(input, resize))
