"""`vision()` / `avision()`: ask a chat model about images (URLs, paths, bytes or data URLs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage

from ai_utils._images import Detail, ImageInput, image_parts
from ai_utils._structured import message_text
from ai_utils.exceptions import UserError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["avision", "vision"]


def _messages(prompt: str, images: ImageInput | Sequence[ImageInput], detail: Detail) -> list[BaseMessage]:
    if not isinstance(prompt, str) or not prompt.strip():
        raise UserError(f"vision() needs a non-empty prompt, got {prompt!r}. Pass e.g. 'What is in the picture?'")
    return [HumanMessage(content=[{"type": "text", "text": prompt}, *image_parts(images, detail)])]


def _model(llm: BaseChatModel | None) -> BaseChatModel:
    if llm is not None:
        return llm
    from ai_utils.llm import get_llm

    return get_llm()


def vision(
    prompt: str,
    images: ImageInput | Sequence[ImageInput],
    *,
    llm: BaseChatModel | None = None,
    detail: Detail = "auto",
) -> str:
    """Ask a vision-capable chat model about one or more images.

    Example:
        ```python
        answer = vision("What is in the picture?", ["https://example.com/photo.jpg", Path("chart.png")])
        ```

    ``http(s)`` URLs are sent as they are (the provider fetches them). Paths, bytes and ``data:`` URLs are
    checked by content (PNG, JPEG, GIF or WebP; the file name or data-URL label does not count) and sent
    as base64 data URLs with the real type. All go in one user message as OpenAI-style ``image_url`` parts
    after the prompt.

    Args:
        prompt: the question or instruction.
        images: one image or a list: URLs, data URLs, file paths (``str`` or ``Path``) or raw bytes.
        llm: the chat model; defaults to `ai_utils.get_llm()` (its default model must accept images).
        detail: ``"auto"`` (default), ``"low"`` (cheaper) or ``"high"``.

    Returns:
        The answer text, stripped.

    Raises:
        UserError: an empty prompt or image list, an unknown ``detail``, a missing file, or an image that is
            not PNG/JPEG/GIF/WebP; raised before any model call.
    """
    messages = _messages(prompt, images, detail)
    return message_text(_model(llm).invoke(messages)).strip()


async def avision(
    prompt: str,
    images: ImageInput | Sequence[ImageInput],
    *,
    llm: BaseChatModel | None = None,
    detail: Detail = "auto",
) -> str:
    """Async twin of `vision`."""
    messages = _messages(prompt, images, detail)
    return message_text(await _model(llm).ainvoke(messages)).strip()
