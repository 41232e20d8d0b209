"""One run's record: its trace id, trace sink, model calls, usage, actions — and the trace events it emits.

Every run on the run path gets a `RunRecord` (`GraphRunner` makes it from the call and puts it in the run's
``config["configurable"]``); the tool-loop middleware (`ai_utils._run.toolloop`) fills it in as the model and
the tools are called, and ``invoke(..., details=True)`` turns it into an `AgentRun`. A run without a record
(a graph driven by hand) still gets the tool-loop behaviour, only nothing is recorded.

`emit_trace` is the one way to send an `AgentTraceEvent` to the wrapper's ``on_trace`` sink, from sync or async
code: a sync sink is called at once; an async sink is awaited in order on the running event loop (the run
waits for the queue with `RunRecord.flush` before it ends) or, in a sync run, driven by `run_sync`. A sink
that raises is logged with the event type and the error class only, and never fails the run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal

from langchain_core.messages import AIMessage
from langchain_core.messages.ai import UsageMetadata, add_usage
from langchain_core.runnables import RunnableConfig
from typing_extensions import TypeVar

from ai_utils._utils import run_sync
from ai_utils.exceptions import UserError
from ai_utils.tools.results import AgentAction

__all__ = [
    "RECORD_KEY",
    "AgentRun",
    "AgentTraceEvent",
    "RunRecord",
    "TraceEventType",
    "TraceSink",
    "aemit_trace",
    "bind_record",
    "check_trace_id",
    "current_record",
    "emit_trace",
    "new_record",
]

logger = logging.getLogger("ai_utils.agents")

RECORD_KEY = "__ai_utils_run"
"""``config["configurable"]`` key of the running run's `RunRecord` (``__``: LangChain copies no such key into
metadata, and the checkpointer never stores it)."""

TraceEventType = Literal[
    "started",
    "model.requested",
    "model.responded",
    "tool.started",
    "tool.finished",
    "action.proposed",
    "action.validated",
    "completed",
    "failed",
]

OutputT = TypeVar("OutputT", covariant=True, default=Any)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class AgentTraceEvent:
    """One step of a run, as ``Agent(on_trace=fn)`` receives it.

    Attributes:
        type: ``"started"``, ``"model.requested"``, ``"model.responded"``, ``"tool.started"``,
            ``"tool.finished"``, ``"action.proposed"``, ``"action.validated"``, ``"completed"`` or ``"failed"``.
        trace_id: the run's id (as in ``AgentRun.trace_id`` and the ``trace_id`` metadata of audit rows).
        agent: the agent's ``name`` (its class name without one).
        at: when it happened (UTC).
        data: what happened: tool names and call ids, iteration, status, usage, model, error class. Never
            tool arguments, results, ``context`` values or message text.
    """

    type: TraceEventType
    trace_id: str
    agent: str
    at: datetime
    data: Mapping[str, Any]


TraceSink = Callable[[AgentTraceEvent], "Awaitable[None] | None"]
"""``on_trace``: a sync or async function of one `AgentTraceEvent`."""


@dataclass(frozen=True, slots=True)
class AgentRun(Generic[OutputT]):
    """What ``invoke(..., details=True)`` returns: the answer and the record of the run that gave it.

    Attributes:
        output: what ``invoke`` returns without ``details`` (the text, the ``output`` instance, ...).
        response_message: the model's last message of the run (``None`` if the run made no model call).
        iterations: model calls this run made.
        actions: the actions (`AgentAction`) the run's tools proposed (`ToolResult.action`), in the order they came.
        usage: token usage summed over the run's model calls (``input_tokens``, ``output_tokens``,
            ``total_tokens``; ``None`` when the model reported none).
        model: the model that gave the last answer, as the provider named it.
        trace_id: the run's id: ``trace_id=`` if given, else a fresh UUID that is also the LangChain root run id;
            audit rows carry it as ``metadata["trace_id"]``.
    """

    output: OutputT
    response_message: AIMessage | None
    iterations: int
    actions: list[AgentAction]
    usage: UsageMetadata | None
    model: str | None
    trace_id: str


def check_trace_id(value: Any) -> str:
    """``trace_id=`` checked whole: a non-empty str of at most 200 visible characters, else `UserError`."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > 200
        or not value.isprintable()
        or any(c.isspace() for c in value)
    ):
        raise UserError(
            f"`trace_id` must be a non-empty str of at most 200 visible characters without spaces, got {value!r}; "
            "e.g. trace_id=str(uuid.uuid4())."
        )
    return value


@dataclass(eq=False)
class RunRecord:
    """What one run has done so far (see the module docstring); shared by the run's tasks and threads."""

    trace_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    given_id: bool = False
    # ``trace_id`` as a UUID when the run made it (`new_record`): the root run id without parsing it back.
    run_uuid: uuid.UUID | None = field(default=None, repr=False)
    allowed_tools: frozenset[str] | None = None
    agent: str = "Agent"
    sink: TraceSink | None = None
    model_calls: int = 0
    usage: UsageMetadata | None = None
    model: str | None = None
    response: AIMessage | None = None
    actions: list[AgentAction] = field(default_factory=list)
    # Tool call ids answered before this run started (a continued step's finished calls: they never run again).
    ended: frozenset[str] = frozenset()
    # The ordering gates of this run's tool steps, by AI message (`ai_utils._run.toolcalls`).
    gates: dict[Any, Any] = field(default_factory=dict)
    _tail: asyncio.Future[None] | None = field(default=None, init=False, repr=False)

    def responded(self, message: AIMessage) -> None:
        """Count one model answer: usage, model name, last message."""
        self.model_calls += 1
        self.response = message
        if message.usage_metadata:
            self.usage = add_usage(self.usage, message.usage_metadata)
        meta = message.response_metadata
        name = meta.get("model_name") or meta.get("model")
        if isinstance(name, str) and name:
            self.model = name

    def result(self, output: _T) -> AgentRun[_T]:
        """The `AgentRun` of this record with ``output``."""
        return AgentRun(
            output=output,
            response_message=self.response,
            iterations=self.model_calls,
            actions=list(self.actions),
            usage=self.usage,
            model=self.model,
            trace_id=self.trace_id,
        )

    def summary(self, **extra: Any) -> dict[str, Any]:
        """The ``completed`` event's data."""
        return {"iterations": self.model_calls, "model": self.model, "usage": self.usage, **extra}

    async def flush(self) -> None:
        """Wait until every async sink call queued so far has run."""
        while self._tail is not None:
            tail = self._tail
            await tail
            if self._tail is tail:
                self._tail = None


def new_record() -> RunRecord:
    """A record with a fresh UUID ``trace_id`` (kept as a UUID too, for the root run id)."""
    run_uuid = uuid.uuid4()
    return RunRecord(str(run_uuid), run_uuid=run_uuid)


def bind_record(config: RunnableConfig, record: RunRecord) -> RunnableConfig:
    """``config`` with ``record`` in it: the configurable entry, ``metadata["trace_id"]``, the root run id."""
    bound: RunnableConfig = {**config}
    bound["configurable"] = {**(config.get("configurable") or {}), RECORD_KEY: record}
    bound["metadata"] = {**(config.get("metadata") or {}), "trace_id": record.trace_id}
    if not record.given_id and "run_id" not in config:
        # Our own id is a UUID: as LangChain's root run id it names the run in tracers (LangSmith, OpenTelemetry).
        bound["run_id"] = record.run_uuid or uuid.UUID(record.trace_id)
    return bound


def current_record(config: Mapping[str, Any] | None) -> RunRecord | None:
    """The `RunRecord` in a run's config, or ``None``."""
    if not config:
        return None
    record = (config.get("configurable") or {}).get(RECORD_KEY)
    return record if isinstance(record, RunRecord) else None


def _failed_sink(event: AgentTraceEvent, error: BaseException) -> None:
    # The class only: a sink's message may quote anything it closed over.
    logger.warning("The on_trace sink raised %s on a %r event; the run goes on.", type(error).__name__, event.type)


async def _deliver(previous: asyncio.Future[None] | None, sink: TraceSink, event: AgentTraceEvent) -> None:
    if previous is not None:
        await previous
    try:
        pending = sink(event)
        if inspect.isawaitable(pending):
            await pending
    except Exception as error:
        _failed_sink(event, error)


def emit_trace(record: RunRecord | None, type: TraceEventType, data: Mapping[str, Any] | None = None) -> None:
    """Send one `AgentTraceEvent` to the record's sink (nothing without a record or a sink); never raises.

    Args:
        record: the run's record (`current_record`).
        type: the event type.
        data: what happened (no arguments, results, message text or ``context`` values).
    """
    if record is None or record.sink is None:
        return
    event = AgentTraceEvent(type, record.trace_id, record.agent, datetime.now(UTC), dict(data or {}))
    sink = record.sink
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None and (record._tail is not None or inspect.iscoroutinefunction(sink)):
        # Async sink on the run's loop: queued behind the earlier events, so they arrive in order.
        record._tail = loop.create_task(_deliver(record._tail, sink, event))
        return
    try:
        pending = sink(event)
        if inspect.isawaitable(pending):
            if loop is not None:
                record._tail = loop.create_task(_deliver(None, lambda _e: pending, event))
                return
            run_sync(_awaited(pending), what="an async on_trace sink in a sync run")
    except Exception as error:
        _failed_sink(event, error)


async def _awaited(pending: Awaitable[Any]) -> None:
    await pending


async def aemit_trace(record: RunRecord | None, type: TraceEventType, data: Mapping[str, Any] | None = None) -> None:
    """Async twin of `emit_trace`: the event (and every one queued before it) has been delivered on return."""
    emit_trace(record, type, data)
    if record is not None:
        await record.flush()
