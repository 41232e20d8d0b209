"""One call of a run: its options, checks, config, input or resume, and result mapping.

Everything here is plain sync code; `GraphRunner`'s ``invoke``/``ainvoke``/``stream``/``astream`` build one
`RunCall` from their options and call the graph's own method of the same name between these helpers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, GraphOutput, StateSnapshot
from pydantic import BaseModel
from typing_extensions import TypedDict

from ai_utils._run.args import config_thread_id, reject_unknown
from ai_utils._run.record import RunRecord, check_trace_id, new_record
from ai_utils.client import Decision, InterruptBatch, InterruptEvent
from ai_utils.exceptions import ModelOutputError, UserError
from ai_utils.streaming._adapter import ChunkAdapter
from ai_utils.streaming._decisions import to_resume
from ai_utils.streaming._interrupts import interrupt_chunk

__all__ = [
    "RECURSION_LIMIT",
    "Decisions",
    "Graph",
    "InputGuard",
    "Interrupt",
    "ModelT",
    "RunCall",
    "RunInput",
    "RunOptions",
    "RunResult",
    "StreamOptions",
    "check_allowed_tools",
    "check_call",
    "check_thread",
    "chunk_adapter",
    "final_result",
    "finished_calls",
    "graph_input",
    "graph_tool_names",
    "input_guards",
    "redact_input",
    "resume_command",
    "run_config",
    "start_input",
]

RECURSION_LIMIT = 200
"""LangGraph's default (25 steps, about 12 tool rounds) is too low for real agents; bound runs with
``max_iterations`` instead."""

Decisions = Sequence[Decision] | Mapping[str, Decision]
Graph = CompiledStateGraph[Any, Any, Any, Any]
Interrupt = InterruptEvent | InterruptBatch
RunInput = str | BaseMessage | list[BaseMessage] | PromptValue | None
"""What a run takes: a message (a str, messages or a prompt value), or ``None`` to resume or continue."""
RunResult = str | BaseModel | Interrupt
"""What a run returns before the wrapper types it: the text, the ``output`` instance, or the interrupt chunk."""
ModelT = TypeVar("ModelT", bound=BaseModel)
"""The ``output`` model of a wrapper built with ``output=`` (its ``invoke`` returns an instance)."""


class RunOptions(TypedDict, total=False):
    """The keyword options of ``invoke``/``ainvoke`` (and of ``stream``/``astream``), all optional."""

    thread_id: str | None
    """The conversation; required with a checkpointer (may also come as ``config["configurable"]["thread_id"]``)."""
    context: Any
    """Run-time context for tools and middleware (an instance of ``context_schema``); never stored."""
    decision: Decision | None
    """The answer to a pending approval: ``"approve"``, ``"reject"``, ``{"type": "reject", "message": ...}``,
    ``{"type": "edit", "args": {...}}``, ``{"type": "respond", "message": ...}``."""
    decisions: Decisions | None
    """One answer per pending item (a list in order, or a mapping by item id)."""
    callbacks: Sequence[BaseCallbackHandler]
    """LangChain callback handlers for this run only (added to the agent's ``callbacks``)."""
    allowed_tools: Sequence[str] | None
    """Only these tools (by name) for this run: the model is offered no other, a call to another is refused."""
    trace_id: str | None
    """The run's id in trace events, ``details=True`` and audit rows (``metadata["trace_id"]``); default: a new
    UUID, which is also LangChain's root run id."""


class StreamOptions(RunOptions, total=False):
    """The keyword options of ``stream``/``astream``: `RunOptions` and which events to show."""

    show_tool_calls: bool
    """Emit tool start/end chunks of the main agent."""
    show_reasoning: bool
    """Emit reasoning chunks of the main agent."""
    show_subagents: bool
    """Emit the text subagents produce as subagent chunks."""


_SHOW = ("show_tool_calls", "show_reasoning", "show_subagents")


class InputGuard(Protocol):
    """A middleware that sees the user's input before the run stores it (guardrails: redact before the first write).

    The run path hands it every input; durable sessions, every prompt and steer before they store it.
    """

    def redact_input(self, value: Any, config: Mapping[str, Any] | None = None) -> Any:
        """``value`` as it may be stored; ``None`` only checks the run's ``config`` (`UserError` if refused)."""
        ...


def input_guards(middleware: Iterable[Any]) -> tuple[InputGuard, ...]:
    """The middleware of a wrapper that are `InputGuard`s, in order."""
    return tuple(m for m in middleware if callable(getattr(m, "redact_input", None)))


def redact_input(value: Any, guards: Sequence[InputGuard], config: Mapping[str, Any] | None = None) -> Any:
    """``value`` after every guard, in order (the same object when none changed it)."""
    for guard in guards:
        value = guard.redact_input(value, config)
    return value


@dataclass(frozen=True, slots=True)
class RunCall:
    """One ``invoke``/``stream`` call, its options checked for names (their values are checked by `check_call`)."""

    input: Any = None
    thread_id: str | None = None
    context: Any = None
    decision: Decision | None = None
    decisions: Decisions | None = None
    callbacks: Sequence[BaseCallbackHandler] = ()
    config: RunnableConfig | None = None
    record: RunRecord = field(default_factory=RunRecord)
    """What the run does (filled in as it runs; ``details=True`` reads it)."""

    @classmethod
    def of(
        cls, owner: str, method: str, input: Any, options: Mapping[str, Any], config: RunnableConfig | None = None
    ) -> RunCall:
        """The call ``owner.method(input, config, **options)``; `UserError` for an option it does not take.

        ``config`` is a LangChain ``RunnableConfig`` (tags, metadata, run_name, callbacks, recursion_limit,
        ``configurable`` extras), merged with ours; a ``thread_id`` in both it and the options must agree.
        """
        known = StreamOptions.__optional_keys__ if method.endswith("stream") else RunOptions.__optional_keys__
        reject_unknown((k for k in options if k not in known), owner=f"{owner}.{method}", known=known, hint="")
        return cls(
            input,
            config_thread_id(options.get("thread_id"), config, owner=f"{owner}.{method}"),
            options.get("context"),
            options.get("decision"),
            options.get("decisions"),
            options.get("callbacks", ()),
            config,
            _record(owner, method, options.get("trace_id"), options.get("allowed_tools"), config),
        )


def _record(owner: str, method: str, trace_id: Any, allowed_tools: Any, config: Any) -> RunRecord:
    """A fresh record with the call's ``trace_id`` and ``allowed_tools`` (checked; `UserError` for bad values).

    Without ``trace_id`` a caller's root run id (``config={"run_id": ...}``) is the trace id: one id per run.
    """
    if trace_id is None and isinstance(config, Mapping) and isinstance(config.get("run_id"), uuid.UUID):
        return _allowed(owner, method, RunRecord(str(config["run_id"]), given_id=True), allowed_tools)
    record = new_record() if trace_id is None else RunRecord(check_trace_id(trace_id), given_id=True)
    return _allowed(owner, method, record, allowed_tools)


def _allowed(owner: str, method: str, record: RunRecord, allowed_tools: Any) -> RunRecord:
    if allowed_tools is not None:
        if isinstance(allowed_tools, str) or not all(isinstance(n, str) for n in allowed_tools):
            raise UserError(
                f"{owner}.{method}(allowed_tools=...) must be a list of tool names, got {allowed_tools!r}; "
                "e.g. allowed_tools=['search']."
            )
        record.allowed_tools = frozenset(allowed_tools)
    return record


def graph_tool_names(graph: Graph) -> set[str]:
    """The names of the tools a `create_agent` graph's tool node runs."""
    node = graph.nodes.get("tools")
    return set(getattr(node.bound, "tools_by_name", {})) if node is not None else set()


def check_allowed_tools(graph: Graph, record: RunRecord, *, owner: str) -> None:
    """`UserError` when ``allowed_tools`` names a tool the graph does not have (checked before the run starts)."""
    if record.allowed_tools is None:
        return
    known = graph_tool_names(graph)
    unknown = sorted(record.allowed_tools - known)
    if unknown:
        raise UserError(
            f"{owner}: allowed_tools names tools it does not have: {unknown!r}; its tools are {sorted(known)!r}. "
            "Fix the names (MCP tools are named `<server>__<tool>`)."
        )


def chunk_adapter(options: Mapping[str, Any]) -> ChunkAdapter:
    """The chunk adapter for one ``stream``/``astream`` call (its ``show_*`` options)."""
    return ChunkAdapter(**{name: options[name] for name in _SHOW if name in options})


def check_call(
    *,
    owner: str,
    input: Any,
    thread_id: str | None,
    decision: Decision | None,
    decisions: Decisions | None,
    has_checkpointer: bool,
) -> None:
    """Validate one ``invoke``/``stream`` call before anything runs.

    Raises:
        UserError: input together with a decision, neither of them, a missing ``thread_id`` with a
            checkpointer, or a decision without a checkpointer to resume from.
    """
    resuming = decision is not None or decisions is not None
    if resuming and input is not None:
        raise UserError(
            f"{owner}: pass either `input` (a new message) or `decision`/`decisions` (answer a pending "
            f"approval), not both; got input={input!r}."
        )
    if not resuming and input is None and not has_checkpointer:
        raise UserError(f"{owner}: nothing to run. Pass `input` (a message) or `decision`/`decisions` to resume.")
    check_thread(owner=owner, thread_id=thread_id, resuming=resuming, has_checkpointer=has_checkpointer)


def check_thread(
    *,
    owner: str,
    thread_id: str | None,
    resuming: bool,
    has_checkpointer: bool,
    resume_fix: str = "Create the agent with `checkpointer=MemorySaver()` (or sqlite_saver(...)) and pass `thread_id`.",
) -> None:
    """The thread half of `check_call`: a ``thread_id`` (a str) with a checkpointer, a checkpointer to resume.

    Args:
        owner: the wrapper's name, for the messages.
        thread_id: the call's ``thread_id``.
        resuming: the call answers a pending interrupt (``decision``/``decisions``).
        has_checkpointer: the wrapper keeps threads.
        resume_fix: how to get a checkpointer, for the message when a decision comes without one.

    Raises:
        UserError: a missing or non-str ``thread_id``, or a decision without a checkpointer.
    """
    if has_checkpointer and not thread_id:
        raise UserError(
            f"{owner} has a checkpointer, so every call needs a `thread_id` naming the conversation, "
            "e.g. `thread_id='user-42'`."
        )
    if resuming and not has_checkpointer:
        raise UserError(
            f"{owner}: resuming with `decision`/`decisions` needs a checkpointer that kept the paused run. {resume_fix}"
        )
    if thread_id is not None and not isinstance(thread_id, str):
        raise UserError(f"{owner}: `thread_id` must be a str, got {thread_id!r}.")


def run_config(thread_id: str | None, *, callbacks: Any = None) -> RunnableConfig:
    """The run's config: ``thread_id`` travels unchanged to the checkpointer."""
    config: RunnableConfig = {"recursion_limit": RECURSION_LIMIT}
    if thread_id is not None:
        config["configurable"] = {"thread_id": thread_id}
    if callbacks is not None:
        config["callbacks"] = callbacks
    return config


def start_input(input: Any) -> dict[str, Any]:
    """A new user turn: a str, one message, a list of messages, or a prompt value (``prompt_template | agent``)."""
    if isinstance(input, str):
        return {"messages": [HumanMessage(input)]}
    if isinstance(input, BaseMessage):
        return {"messages": [input]}
    if isinstance(input, list) and all(isinstance(m, BaseMessage) for m in input):
        return {"messages": list(input)}
    if isinstance(input, PromptValue):
        return {"messages": input.to_messages()}
    raise UserError(
        f"`input` must be a str, LangChain messages or a prompt value (e.g. from a ChatPromptTemplate), got {input!r}."
    )


def resume_command(
    state: StateSnapshot,
    config: RunnableConfig,
    decision: Decision | None,
    decisions: Decisions | None,
    idle: str | None = None,
) -> Command[Any] | None:
    """The resume command for the thread's pending interrupts (``state``), or ``None`` to continue an unfinished run.

    Args:
        state: the thread's state (``graph.get_state(config)``).
        config: the run's config (names the thread).
        decision: the answer when exactly one item is pending (several need ``decisions``).
        decisions: one answer per pending item.
        idle: the wrapper's message for a decision when nothing is pending (default: the decision mapper's).

    Raises:
        UserError: no decision while an approval waits, a decision with nothing pending, or nothing to continue.
    """
    if decision is not None or decisions is not None:
        if idle is not None and not state.interrupts:
            raise UserError(idle)
        return to_resume(decision, decisions, pending=state.interrupts)
    thread = (config.get("configurable") or {}).get("thread_id")
    if state.interrupts:
        raise UserError(
            f"Thread {thread!r} waits for approval; answer it with `decision=` (e.g. decision='approve') or "
            "send a new message as `input`."
        )
    if not state.next:
        raise UserError(
            f"Thread {thread!r} has no unfinished run to continue (input=None); pass `input` (a new message)."
        )
    return None  # continue the stored run (e.g. after a crash): the graph runs its pending steps


def graph_input(
    call: RunCall, config: RunnableConfig, state: StateSnapshot | None, guards: Sequence[InputGuard] = ()
) -> Any:
    """What the graph runs on: the new turn, or (``state``: the thread, read when ``input`` is None) the resume.

    The new turn's messages pass the ``guards`` first: LangGraph writes the input to the checkpointer before any
    middleware runs, so this is the last point before the first write.
    """
    if call.input is not None:
        return redact_input(start_input(call.input), guards, config)
    redact_input(None, guards, config)  # a resume stores no input, but the run's config is still checked
    if state is None:
        raise TypeError("graph_input: a call without input needs the thread's state")
    return resume_command(state, config, call.decision, call.decisions)


def finished_calls(state: StateSnapshot) -> frozenset[str]:
    """Ids of the tool calls whose results a stopped step already stored (its finished tasks' pending writes)."""
    ids: set[str] = set()
    for task in state.tasks:
        result = task.result
        updates = result if isinstance(result, list) else [result]
        for update in updates:
            messages = update.get("messages") if isinstance(update, Mapping) else None
            for message in messages if isinstance(messages, list) else [messages]:
                if isinstance(message, ToolMessage):
                    ids.add(message.tool_call_id)
    return frozenset(ids)


def final_result(output: GraphOutput[Any], *, structured: bool) -> RunResult:
    """What ``invoke`` returns: the interrupt chunk if the run paused, else the structured output or text."""
    if output.interrupts:
        chunk = interrupt_chunk(output.interrupts)
        if chunk is not None:
            return chunk
    values = output.value
    if structured:
        response: BaseModel | None = values.get("structured_response") if isinstance(values, Mapping) else None
        if response is None:
            # e.g. `max_iterations` or `should_break_early` ended the run before a final answer
            raise ModelOutputError(
                "The run ended without a structured answer (`output=`). Fix: raise `max_iterations`, or let "
                "`should_break_early` stop only after the model answered.",
                errors="no structured response",
                attempts=0,
                output=_last_text(values),
            )
        return response
    return _last_text(values)


def _last_text(values: Any) -> str:
    messages = values.get("messages", []) if isinstance(values, Mapping) else []
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message.text
    return ""
