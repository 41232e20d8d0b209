"""`MemoryAuditSink`: keeps gateway audit rows in ``.entries`` for assertions."""

from __future__ import annotations

from ai_utils.gateway.audit import MemoryAuditSink

__all__ = ["MemoryAuditSink"]
