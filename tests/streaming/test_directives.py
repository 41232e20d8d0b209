"""The directive line filter: however a reply is cut into tokens, the text shown is what the parser keeps."""

from __future__ import annotations

import random

import pytest

from ai_utils.gateway.actions import parse_assistant_directives
from ai_utils.streaming._directives import DirectiveLines

REPLIES = [
    'Got it.\n!> ticket.summarize {"id": "T-1"}\n?> Draft a reply',
    "Line one\n\n  !> a.b {}\nLine two\n?> x\n",
    "!> only {}\n?> follow",
    "Question?\n?\n!\nEnd",
    "  indented\n\n\nafter blanks\n!> x {}\n\n",
    "Use the ?> operator\nand !> too",
    "Hallo\r\n!> a {}\r\nWelt",
    "",
]


def shown(pieces: list[str]) -> str:
    lines = DirectiveLines()
    return "".join(lines.feed(piece) for piece in pieces) + lines.flush()


@pytest.mark.parametrize("reply", REPLIES)
def test_every_cut_of_a_reply_shows_exactly_the_parsed_visible_text(reply: str) -> None:
    expected = parse_assistant_directives(reply).text
    cuts = random.Random(reply)
    for _ in range(300):
        points = sorted(cuts.sample(range(1, len(reply)), k=min(max(len(reply) - 1, 0), cuts.randint(0, 10))))
        pieces = [reply[i:j] for i, j in zip([0, *points], [*points, len(reply)], strict=True)]
        assert shown(pieces).strip() == expected, pieces
    assert shown(list(reply)).strip() == expected  # one character a token


def test_a_directive_line_is_never_shown_in_part() -> None:
    lines = DirectiveLines()
    out = [
        lines.feed(piece) for piece in ["Done.", "\n", "!", ">", " refund", ' {"order"', ': "A1"}', "\n", "?", "> Next"]
    ]
    out.append(lines.flush())
    assert out == ["Done.", "", "", "", "", "", "", "", "", "", ""]
