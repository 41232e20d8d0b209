"""OpenTelemetry: GenAI semantic-convention spans for agent runs, model calls and tool calls (extra ``otel``).

- `instrument(tracer_provider=None, *, capture_content=False)`: every LangChain run of the process;
  `uninstrument()` stops it.
- ``Agent(..., tracer_provider=...)`` (and `DeepAgent`, `Chain`): that wrapper's runs only.
- `OpenTelemetryCallbackHandler`: the LangChain callback handler both use, for ``callbacks=[...]`` anywhere.

Spans attach as LangChain callbacks (like the gateway's), never by changing a run. Importing this package needs
no extra; `instrument` and the handler need ``opentelemetry-api``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports

if TYPE_CHECKING:
    from ai_utils.otel._handler import OpenTelemetryCallbackHandler
    from ai_utils.otel._instrument import instrument, uninstrument

__all__ = ["OpenTelemetryCallbackHandler", "instrument", "uninstrument"]

_LAZY: dict[str, tuple[str, str]] = {
    "OpenTelemetryCallbackHandler": ("ai_utils.otel._handler", "OpenTelemetryCallbackHandler"),
    "instrument": ("ai_utils.otel._instrument", "instrument"),
    "uninstrument": ("ai_utils.otel._instrument", "uninstrument"),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
