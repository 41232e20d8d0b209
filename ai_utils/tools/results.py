"""`ToolResult` and `AgentAction`: what a tool may return besides plain text (SPEC §19, seed agent-core-toolloop).

A tool that returns a `ToolResult` gives the model ``{"status", "message", "data"}`` as JSON (and its images
as image content, for models that take images), marks the result failed with ``status="error"``, and may
propose an `AgentAction` for the caller: the action is collected on the run (``invoke(..., details=True)``
lists it) and never sent to the model.

Everything is checked when the result is built, so a bad value fails inside the tool that made it, naming
the value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic_core import PydanticSerializationError, to_jsonable_python

from ai_utils._images import base64_image
from ai_utils.exceptions import UserError

__all__ = ["AgentAction", "ToolResult", "ToolStatus"]

ToolStatus = Literal["ok", "error"]
"""Whether the tool did what it was asked (``"error"``: the model sees a failed tool result)."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True, slots=True)
class AgentAction:
    """Something a tool proposes for the caller to do (e.g. show a form, open a ticket); never sent to the model.

    Example:
        ```python
        from ai_utils import AgentAction, ToolResult


        def book_table(day: str) -> ToolResult:
            \"\"\"Book a table.\"\"\"
            return ToolResult("ok", f"Proposed a booking for {day}.", action=AgentAction("booking", {"day": day}))
        ```

    Attributes:
        type: what kind of action, e.g. ``"booking"``.
        payload: its data (a copy of the mapping given).

    Raises:
        UserError: ``type`` not a non-empty str, or ``payload`` not a mapping.
    """

    type: str
    payload: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type.strip():
            raise UserError(f"AgentAction(type=...) must be a non-empty str, got {_short(self.type)}.")
        if not isinstance(self.payload, Mapping):
            raise UserError(
                f"AgentAction(payload=...) must be a mapping, got {_short(self.payload)}; "
                "e.g. AgentAction('booking', {'day': 'Mon'})."
            )
        object.__setattr__(self, "payload", dict(self.payload))


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's structured result: the model sees ``{"status", "message", "data"}`` as JSON.

    Example:
        ```python
        from ai_utils import ToolResult


        def find_order(order_id: str) -> ToolResult:
            \"\"\"Look an order up.\"\"\"
            if order_id != "A1":
                return ToolResult("error", f"No order {order_id!r}.")
            return ToolResult("ok", "Found it.", data={"id": "A1", "status": "shipped"})
        ```

    Attributes:
        status: ``"ok"`` or ``"error"`` (the tool result is then marked failed, as a raised error is).
        message: what happened, for the model.
        data: JSON data for the model (pydantic models, dataclasses and dates are converted; NaN and infinity
            are not JSON).
        action: an `AgentAction` for the caller, collected on the run, never sent to the model.
        images: images for the model (bytes, base64 text or ``data:`` URLs; PNG, JPEG, GIF or WebP); a model
            whose profile says it takes no images in tool results gets a note instead.

    Raises:
        UserError: an unknown ``status``, a ``message`` that is not a str, ``data`` that is not JSON data, an
            ``action`` that is not an `AgentAction`, or an image that is not one of the formats above.
    """

    status: ToolStatus
    message: str
    data: Any = None
    action: AgentAction | None = None
    images: Sequence[bytes | str] = ()
    _json: str = field(init=False, repr=False, compare=False)
    _images: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.status not in get_args(ToolStatus):
            raise UserError(f"ToolResult(status={self.status!r}) is not a status; use 'ok' or 'error'.")
        if not isinstance(self.message, str):
            raise UserError(f"ToolResult(message=...) must be a str, got {_short(self.message)}.")
        if self.action is not None and not isinstance(self.action, AgentAction):
            raise UserError(
                f"ToolResult(action={_short(self.action)}) is not an AgentAction; pass AgentAction(type, payload)."
            )
        try:
            data = to_jsonable_python(self.data)
            text = json.dumps(
                {"status": self.status, "message": self.message, "data": data}, ensure_ascii=False, allow_nan=False
            )
        except (PydanticSerializationError, TypeError, ValueError) as exc:
            raise UserError(
                f"ToolResult(data=...) must be JSON data (dicts, lists, str, numbers, pydantic models), got "
                f"{_short(self.data)}."
            ) from exc
        images = self.images
        if isinstance(images, bytes | bytearray | memoryview | str) or not isinstance(images, Sequence):
            raise UserError(f"ToolResult(images=...) must be a list of images, got {_short(images)}; wrap it: [img].")
        object.__setattr__(self, "images", tuple(images))
        object.__setattr__(self, "_json", text)
        object.__setattr__(
            self,
            "_images",
            tuple(base64_image(image, where=f"ToolResult images[{i}]") for i, image in enumerate(images)),
        )

    def content(self, *, with_images: bool = True) -> str | list[str | dict[str, Any]]:
        """What the model sees: the JSON text, followed by one image block per image (or a note without them).

        Args:
            with_images: ``False`` for a model that takes no images in tool results.
        """
        if not self._images:
            return self._json
        if not with_images:
            note = f"[{len(self._images)} image(s) left out: this model takes no images in tool results]"
            return f"{self._json}\n{note}"
        blocks: list[str | dict[str, Any]] = [{"type": "text", "text": self._json}]
        blocks.extend({"type": "image", "base64": data, "mime_type": mime} for mime, data in self._images)
        return blocks
