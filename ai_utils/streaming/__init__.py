"""Streaming: graph stream -> client chunks, NDJSON / AG-UI / Vercel AI encoders, and console helpers.

Imports lazily (PEP 562): the chunk adapter, the encoders and the human-in-the-loop helpers need no extra but
``to_ag_ui`` (``ag-ui-protocol``); ``StreamResponse`` needs Starlette and ``log_chunk``/``session`` need rich
(extra ``server``), loaded on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports

_LAZY: dict[str, str] = {
    "StreamResponse": "ai_utils.streaming.ndjson",
    "andjson_lines": "ai_utils.streaming._encode",
    "approve_all": "ai_utils.streaming._hitl",
    "approve_decision": "ai_utils.streaming._hitl",
    "asession": "ai_utils.streaming.console",
    "create_resume_command": "ai_utils.streaming._hitl",
    "edit_decision": "ai_utils.streaming._hitl",
    "encode_chunk": "ai_utils.streaming._encode",
    "is_interrupt_result": "ai_utils.streaming._hitl",
    "log_chunk": "ai_utils.streaming.console",
    "map_result_to_interrupt": "ai_utils.streaming._hitl",
    "ndjson_lines": "ai_utils.streaming._encode",
    "parse_decision": "ai_utils.streaming.console",
    "reject_decision": "ai_utils.streaming._hitl",
    "respond_decision": "ai_utils.streaming._hitl",
    "session": "ai_utils.streaming.console",
    "to_ag_ui": "ai_utils.streaming._ag_ui",
    "to_vercel_ai": "ai_utils.streaming._vercel",
}

if TYPE_CHECKING:
    from ai_utils.streaming._ag_ui import to_ag_ui
    from ai_utils.streaming._encode import andjson_lines, encode_chunk, ndjson_lines
    from ai_utils.streaming._hitl import (
        approve_all,
        approve_decision,
        create_resume_command,
        edit_decision,
        is_interrupt_result,
        map_result_to_interrupt,
        reject_decision,
        respond_decision,
    )
    from ai_utils.streaming._vercel import to_vercel_ai
    from ai_utils.streaming.console import asession, log_chunk, parse_decision, session
    from ai_utils.streaming.ndjson import StreamResponse

__all__ = [
    "StreamResponse",
    "andjson_lines",
    "approve_all",
    "approve_decision",
    "asession",
    "create_resume_command",
    "edit_decision",
    "encode_chunk",
    "is_interrupt_result",
    "log_chunk",
    "map_result_to_interrupt",
    "ndjson_lines",
    "parse_decision",
    "reject_decision",
    "respond_decision",
    "session",
    "to_ag_ui",
    "to_vercel_ai",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
