"""`instrument()` / `uninstrument()`: OpenTelemetry spans for every LangChain run in this process.

Attached as a LangChain callback like the gateway's, never by patching LangChain: LangChain's public
``register_configure_hook`` adds the handler a hook's variable holds to every run's callback manager. That
variable is read with ``.get()`` only, and a ``ContextVar`` set in ``instrument()`` would be invisible to threads
started before (and to plain ``threading.Thread``s), so the hook reads `_Slot`, one process-wide value.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from langchain_core.callbacks import BaseCallbackHandler
    from opentelemetry.trace import TracerProvider

__all__ = ["active_handler", "instrument", "provider_callbacks", "uninstrument"]


class _Slot:
    """What LangChain's configure hook reads: the active handler, for every thread and task."""

    handler: BaseCallbackHandler | None = None

    def get(self) -> BaseCallbackHandler | None:
        return self.handler


_SLOT = _Slot()
_LOCK = threading.Lock()
_registered = False


def instrument(tracer_provider: TracerProvider | None = None, *, capture_content: bool = False) -> None:
    """Trace every LangChain run of this process (our agents, chains, gateway calls) with OpenTelemetry.

    Spans follow the GenAI semantic conventions: ``invoke_agent <name>`` per agent run, ``chat <model>`` per
    model call (model, provider, token usage, ``gen_ai.conversation.id`` = the thread or session id) and
    ``execute_tool <tool>`` per tool call (error status when it fails). Calling it again replaces the settings.

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
    from langchain_core.tracers.context import register_configure_hook

    from ai_utils.otel._handler import OpenTelemetryCallbackHandler

    handler = OpenTelemetryCallbackHandler(tracer_provider, capture_content=capture_content)
    global _registered
    with _LOCK:
        if not _registered:
            register_configure_hook(cast("Any", _SLOT), inheritable=True)
            _registered = True
        _SLOT.handler = handler


def uninstrument() -> None:
    """Stop tracing runs that start from now on (runs already going end their spans)."""
    with _LOCK:
        _SLOT.handler = None


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
