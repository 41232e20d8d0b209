"""OpenTelemetry: GenAI semantic-convention spans for agent runs, model calls and tool calls (extra ``otel``).

- `instrument(tracer_provider=None, *, capture_content=False)`: every LangChain run of the process;
  `uninstrument()` stops it.
- ``Agent(..., tracer_provider=...)`` (and `DeepAgent`, `Chain`): that wrapper's runs only (for an agent, in
  place of ``instrument()``'s provider).
- `OpenTelemetryCallbackHandler`: the LangChain callback handler both use, for ``callbacks=[...]`` anywhere.

Our own agent runs (`Agent`, `DeepAgent`, durable session turns) emit their spans from the run path's tracing
slot (`ai_utils._run.tracing`, fed by `_spans.SpanTracer`): a LangChain callback handler would make LangChain run
its callback machinery for every runnable of the run, which costs far more than the spans. Every other LangChain
run gets them from the callback handler (like the gateway's), never by changing a run. Importing this package
needs no extra; `instrument` and the handler need ``opentelemetry-api``.
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
