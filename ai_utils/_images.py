"""Images for chat models: URLs pass through; paths, bytes and data URLs become checked base64 data URLs.

The format is read from the content (magic bytes), never from a file name or a data URL's label, so
a PNG saved as ``photo.jpg`` is sent as ``image/png``. Four fixed signatures (PNG, JPEG, GIF, WebP:
what OpenAI-compatible vision APIs accept) do not justify a sniffing dependency.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias, get_args

from ai_utils.exceptions import UserError

__all__ = ["Detail", "ImageInput", "base64_image", "image_parts", "image_url", "sniff"]

ImageInput: TypeAlias = str | os.PathLike[str] | bytes | bytearray | memoryview
"""An image: an ``http(s)://`` URL, a ``data:`` URL (base64), a file path, or the raw bytes."""
Detail: TypeAlias = Literal["auto", "low", "high"]
"""OpenAI's ``image_url.detail``: how finely the model looks (``low`` is cheaper)."""

_FORMATS = "PNG, JPEG, GIF or WebP"
# Input bytes per base64 step (a multiple of 3, so the steps' texts join without padding in between).
_B64_STEP = 3 * 16384
# A thread keeps its scratch buffer only up to this size (the base64 of a ~3 MB image): a larger image gets a
# fresh buffer, so a pool of threads never holds more than a few MB each.
_SCRATCH_MAX = 4 * 1024 * 1024
_scratch = threading.local()


def sniff(head: bytes | bytearray | memoryview) -> str | None:
    """The MIME type of an image from its first bytes (12 are enough), or ``None`` for another format."""
    head = bytes(head[:12])
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _not_an_image(where: str, head: bytes | bytearray | memoryview) -> UserError:
    return UserError(
        f"{where} is not a {_FORMATS} image (it starts with {bytes(head[:8])!r}). "
        "Convert it to one of these formats, or pass an http(s) URL."
    )


def _b64_text(data: bytes | bytearray | memoryview, prefix: str = "") -> str:
    """``prefix`` + the base64 text of ``data``: encoded in 48 KB steps into a per-thread scratch buffer, decoded once.

    One fresh large buffer (the result) instead of three (base64 bytes, their str, the prefixed str): on a VM
    each fresh MB-sized buffer costs hundreds of page faults, more than the encoding itself. The scratch buffer
    (kept up to `_SCRATCH_MAX` bytes per thread) and the small steps reuse warm memory.
    """
    view = memoryview(data).cast("B")
    if len(view) <= _B64_STEP:
        return prefix + binascii.b2a_base64(view, newline=False).decode("ascii")
    head = prefix.encode("ascii")
    size = len(head) + (len(view) + 2) // 3 * 4
    scratch: bytearray | None = getattr(_scratch, "buffer", None)
    if scratch is None or len(scratch) < size:
        scratch = bytearray(size)
        if size <= _SCRATCH_MAX:
            _scratch.buffer = scratch
    scratch[: len(head)] = head
    at = len(head)
    for start in range(0, len(view), _B64_STEP):
        step = binascii.b2a_base64(view[start : start + _B64_STEP], newline=False)
        scratch[at : at + len(step)] = step
        at += len(step)
    with memoryview(scratch) as whole, whole[:at] as text:
        return str(text, "ascii")


def _encode(data: bytes | bytearray | memoryview, where: str) -> str:
    mime = sniff(data)
    if mime is None:
        raise _not_an_image(where, data)
    return _b64_text(data, f"data:{mime};base64,")


def _data_url(url: str, where: str) -> str:
    header, comma, payload = url.partition(",")
    if not comma or not header.lower().endswith(";base64"):
        raise UserError(f"{where} is a data URL that is not base64 ({_short(header)}). Use data:image/...;base64,...")
    # The whole payload, not its first characters: a valid head on a broken body would reach the provider.
    try:
        head = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UserError(f"{where} is a data URL whose payload is not valid base64 ({exc}).") from exc
    mime = sniff(head)
    if mime is None:
        raise _not_an_image(where, head)
    if header[len("data:") :].lower().split(";", 1)[0] == mime:
        return url
    return f"data:{mime};base64,{payload}"  # mislabelled: send the content's real type


def base64_image(image: bytes | bytearray | memoryview | str, *, where: str = "the image") -> tuple[str, str]:
    """``(mime_type, base64 data)`` of an image given as bytes, a base64 ``data:`` URL or plain base64 text.

    The type is read from the content, as for `image_url`; no URL or file path is taken (the value comes from
    code that already holds the image, e.g. a tool's result).

    Raises:
        UserError: not bytes or a str, not valid base64, or not a PNG/JPEG/GIF/WebP image.
    """
    if isinstance(image, bytes | bytearray | memoryview):
        mime = sniff(image)
        if mime is None:
            raise _not_an_image(where, image)
        return mime, _b64_text(image)
    if not isinstance(image, str):
        raise UserError(f"{where} is a {type(image).__name__}; pass the image bytes, base64 text or a data: URL.")
    if image[:5].lower() == "data:":
        url = _data_url(image, where)
        return url[len("data:") : url.index(";")], url.partition(",")[2]
    try:
        head = base64.b64decode(image, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UserError(f"{where} is neither base64 image data nor a data: URL ({_short(image)}).") from exc
    mime = sniff(head)
    if mime is None:
        raise _not_an_image(where, head)
    return mime, image


def image_url(image: ImageInput, *, where: str = "the image") -> str:
    """The URL to send for one image: an http(s) URL unchanged, anything else as a checked data URL.

    Raises:
        UserError: not a URL, data URL, existing file or bytes, or not a PNG/JPEG/GIF/WebP image.
    """
    if isinstance(image, bytes | bytearray | memoryview):
        return _encode(image, where)
    if isinstance(image, str):
        scheme = image[:8].lower()
        if scheme.startswith(("http://", "https://")):
            return image
        if scheme.startswith("data:"):
            return _data_url(image, where)
    if not isinstance(image, str | os.PathLike):
        raise UserError(
            f"{where} is a {type(image).__name__}; pass an http(s) URL, a data URL, a file path or the image bytes."
        )
    path = Path(image)
    if not path.is_file():
        raise UserError(
            f"{where} {_short(str(image))} is not an http(s) URL, a data: URL or an existing file. "
            "Check the path, or pass the image bytes."
        )
    return _encode(path.read_bytes(), f"{where} ({path.name})")


def image_parts(images: ImageInput | Sequence[ImageInput], detail: Detail) -> list[dict[str, Any]]:
    """OpenAI-style ``image_url`` content parts for one image or a list of them.

    Raises:
        UserError: no images, an unknown ``detail``, or a bad image (see `image_url`).
    """
    if detail not in get_args(Detail):
        raise UserError(f"Unknown detail {detail!r}. Use 'auto', 'low' or 'high'.")
    items: Sequence[ImageInput] = (
        [images] if isinstance(images, str | bytes | bytearray | memoryview | os.PathLike) else images
    )
    if not isinstance(items, Sequence) or not items:
        raise UserError(f"`images` must be one image or a non-empty list of images, got {_short(images)}.")
    return [
        {"type": "image_url", "image_url": {"url": image_url(image, where=f"images[{index}]"), "detail": detail}}
        for index, image in enumerate(items)
    ]
