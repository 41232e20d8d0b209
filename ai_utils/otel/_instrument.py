"""`instrument()` / `uninstrument()`: OpenTelemetry spans for every LangChain run in this process.

Two ways in, one set of spans:

- Our own agent runs (`Agent`, `DeepAgent`, durable session turns) trace themselves from the run path's tracing
  slot (`ai_utils._run.tracing`): ``instrument()`` installs a `SpanTracer` there, and ``tracer_provider=`` gives
  a wrapper its own (`provider_tracer`). Any LangChain callback handler makes LangChain and LangGraph run their
  callback machinery for every runnable of the run, which cost +17% per turn, far more than the spans.
- Every other LangChain run (chains, `Chain`, gateway calls on a raw model, user runnables, what a tool of ours
  runs) gets the tracer's callback handler, never by patching LangChain: LangChain's public
  ``register_configure_hook`` adds the handler a hook's variable holds to every run's callback manager. That
  variable is read with ``.get()`` only, and a ``ContextVar`` set in ``instrument()`` would be invisible to threads
  started before (and to plain ``threading.Thread``s), so the hook reads `_Slot`, one process-wide value, which
  hands out no handler while a run of ours traces itself (and the zone's handler inside its tool calls).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, cast

from ai_utils._run import tracing

if TYPE_CHECKING:
    from langchain_core.callbacks import BaseCallbackHandler
    from opentelemetry.trace import TracerProvider

    from ai_utils.otel._spans import SpanTracer

__all__ = ["active_handler", "instrument", "provider_callbacks", "provider_tracer", "uninstrument"]


class _Slot:
    """What LangChain's configure hook reads: the active handler, for every thread and task.

    None while a run of ours traces itself here (`ai_utils._run.tracing`); in one of its tool calls, the handler
    of the run's tracer (so what the tool runs hangs under its ``execute_tool`` span).
    """

    handler: BaseCallbackHandler | None = None

    def get(self) -> BaseCallbackHandler | None:
        active = tracing.active()
        if active is None:
            return self.handler
        return active.handler if type(active) is tracing.Zone else None


_SLOT = _Slot()
_LOCK = threading.Lock()
_registered = False
# The tracer the last ``instrument(provider, ...)`` made, its provider by weak reference (the tracer holds no
# reference to it) and its ``capture_content``: instrumenting again with the same provider and settings (even after
# `uninstrument`) reuses it, so its SDK tracer stays warm. The entry goes with its provider.
_last: tuple[weakref.ref[Any], bool, SpanTracer] | None = None


def instrument(tracer_provider: TracerProvider | None = None, *, capture_content: bool = False) -> None:
    """Trace every LangChain run of this process (our agents, chains, gateway calls) with OpenTelemetry.

    Spans follow the GenAI semantic conventions: ``invoke_agent <name>`` per agent run, ``chat <model>`` per
    model call (model, provider, token usage, ``gen_ai.conversation.id`` = the thread or session id) and
    ``execute_tool <tool>`` per tool call (error status when it fails). Calling it again replaces the settings
    (the same provider and settings again, even after `uninstrument`, keep the tracer they made).

    Example:
        ```python
        from ai_utils.otel import instrument

        instrument()  # spans go to the global TracerProvider your OpenTelemetry setup installed
        ```

    Args:
        tracer_provider: where spans go (default: OpenTelemetry's global provider).
        capture_content: also record message text, tool arguments and tool results (off by default: they may
            hold personal data). The run's ``context`` and secrets are never recorded.

    Raises:
        ImportError: ``opentelemetry-api`` is not installed (the ``otel`` extra).
    """
    from ai_utils.otel._spans import SpanTracer

    global _last
    with _LOCK:
        last = _last
        capture = bool(capture_content)
        if tracer_provider is not None and last is not None and last[0]() is tracer_provider and last[1] is capture:
            tracer = last[2]
        else:
            tracer = SpanTracer(tracer_provider, capture_content=capture)
            _last = None if tracer_provider is None else (weakref.ref(tracer_provider, _forget), capture, tracer)
        _register()
        _SLOT.handler = tracer.handler
        tracing.install(tracer)


def uninstrument() -> None:
    """Stop tracing runs that start from now on (runs already going end their spans)."""
    with _LOCK:
        _SLOT.handler = None
        tracing.install(None)


def _forget(ref: Any) -> None:
    global _last
    if _last is not None and _last[0] is ref:
        _last = None


def _register() -> None:
    """Put `_SLOT` among LangChain's configure hooks (once; under `_LOCK`)."""
    from langchain_core.tracers.context import register_configure_hook

    global _registered
    if not _registered:
        register_configure_hook(cast("Any", _SLOT), inheritable=True)
        _registered = True


def active_handler() -> BaseCallbackHandler | None:
    """The handler `instrument` installed, or ``None``."""
    return _SLOT.handler


def provider_callbacks(tracer_provider: TracerProvider | None) -> list[BaseCallbackHandler]:
    """The callbacks a wrapper's ``tracer_provider=`` adds: a handler for that provider (none for ``None``).

    Raises:
        ImportError: ``opentelemetry-api`` is not installed (the ``otel`` extra).
    """
    if tracer_provider is None:
        return []
    from ai_utils.otel._handler import OpenTelemetryCallbackHandler

    return [OpenTelemetryCallbackHandler(tracer_provider)]


def provider_tracer(tracer_provider: TracerProvider | None) -> SpanTracer | None:
    """The span maker a wrapper's ``tracer_provider=`` gives its runs (``None`` for ``None``).

    Raises:
        ImportError: ``opentelemetry-api`` is not installed (the ``otel`` extra).
    """
    if tracer_provider is None:
        return None
    from ai_utils.otel._spans import SpanTracer

    tracer = SpanTracer(tracer_provider)
    with _LOCK:
        _register()  # what the runs' tool calls run is traced by the tracer's handler, through `_SLOT`
    return tracer
