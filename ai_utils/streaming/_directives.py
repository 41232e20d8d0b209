"""Directive lines in a streamed answer (``Agent(actions=...)``): kept out of text chunks, even split over tokens.

An actions agent's model ends its answer with ``!> <id> <json>`` action lines and ``?> <text>`` follow-up lines
(`ai_utils.gateway.actions.parse_assistant_directives` reads them from the whole reply). While the reply streams,
`DirectiveLines` holds the start of each line until it can tell: a line whose first non-blank characters are
``!>`` or ``?>`` is dropped whole, any other line streams on at once. A line break is held until the next
visible line, so dropping a directive line leaves no stray blank line and the joined text chunks are the
visible message.

The graph announces an actions run and its validated directives with custom stream parts (`directive_part`),
written by the actions middleware; the chunk adapter turns them into ``{"kind": "action" | "follow_up"}``
chunks and starts filtering text when it sees the first one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ai_utils.client import ActionEvent, FollowUpEvent

__all__ = ["DIRECTIVE_PART", "DirectiveLines", "directive_chunk", "directive_part"]

DIRECTIVE_PART = "__ai_utils_directive__"
"""Marks a custom stream part of an actions run (told apart from user writer events)."""

_PREFIXES = ("!>", "?>")


def directive_part(kind: Literal["start", "action", "follow_up"], **fields: Any) -> dict[str, Any]:
    """The custom stream part the actions middleware writes: ``start`` (before a model call), an action, a follow-up."""
    return {DIRECTIVE_PART: kind, **fields}


def directive_chunk(part: Mapping[str, Any]) -> ActionEvent | FollowUpEvent | None:
    """The client chunk for a directive part (``None`` for ``start``)."""
    kind = part[DIRECTIVE_PART]
    if kind == "action":
        return {"kind": "action", "id": part["id"], "status": part["status"], "params": dict(part["params"])}
    if kind == "follow_up":
        return {"kind": "follow_up", "text": part["text"]}
    return None


class DirectiveLines:
    """Filters the text of streamed replies line by line: directive lines out, everything else through."""

    __slots__ = ("_held", "_line", "_state")

    def __init__(self) -> None:
        self._line = ""  # the start of the current line, while it is undecided
        self._state: Literal["open", "text", "directive"] = "open"
        self._held = ""  # line breaks (and blank lines) not shown yet: they belong before the next visible line

    def feed(self, text: str) -> str:
        """The visible part of the next piece of a reply (often all of it, sometimes nothing yet)."""
        out: list[str] = []
        # "\r\n" may arrive split over two tokens; a bare "\r" never ends a line in a model's reply.
        *ended, last = text.replace("\r", "").split("\n")
        for body in ended:
            self._add(body, out)
            self._end_line(out)
        self._add(last, out)
        return "".join(out)

    def _add(self, body: str, out: list[str]) -> None:
        if self._state == "text":
            out.append(body)
        elif self._state == "open":
            self._line += body
            start = self._line.lstrip()
            if start.startswith(_PREFIXES):
                self._state, self._line = "directive", ""
            elif start and start not in ("!", "?"):
                out.append(self._held + self._line)
                self._state, self._line, self._held = "text", "", ""

    def _end_line(self, out: list[str]) -> None:
        if self._state == "open" and self._line.strip():  # a line of just "!" or "?" is text
            out.append(self._held + self._line)
            self._held = "\n"
        elif self._state == "open":
            self._held += self._line + "\n"  # a blank line: shown only if visible text follows
        elif self._state == "text":
            self._held = "\n"
        self._state, self._line = "open", ""

    def flush(self) -> str:
        """The end of a reply: the undecided rest of its last line, if it is text (held line breaks are dropped)."""
        rest = self._line if self._state == "open" and self._line.strip() else ""
        visible = self._held + rest if rest else ""
        self._state, self._line, self._held = "open", "", ""
        return visible
