"""Real image bytes for the session tests (a valid PNG built with zlib; no imaging library needed)."""

from __future__ import annotations

import struct
import zlib

JPEG_HEAD = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(width: int = 1, height: int = 1, rgb: tuple[int, int, int] = (255, 0, 0), *, padding: int = 0) -> bytes:
    """A valid ``width`` x ``height`` PNG of one colour (``padding`` bytes of an ancillary chunk make it bigger)."""
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    head = _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    extra = _chunk(b"tEXt", b"pad\x00" + b"x" * padding) if padding else b""
    return b"\x89PNG\r\n\x1a\n" + head + extra + _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b"")
