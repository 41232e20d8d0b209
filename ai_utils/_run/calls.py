"""Call checks, run config, input or resume, result mapping: the plain-sync half of the one run path.

Everything here is plain sync code; each wrapper's ``invoke``/``ainvoke``/``stream``/``astream`` is a thin
shell that calls the graph's own method of the same name between these helpers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Durability, GraphOutput, StateSnapshot
from pydantic import BaseModel

from ai_utils.client import Decision, InterruptBatch, InterruptEvent, StreamChunk
from ai_utils.exceptions import ModelOutputError, UserError
from ai_utils.streaming._adapter import ChunkAdapter, aadapt, adapt, stream_kwargs
from ai_utils.streaming._decisions import to_resume
from ai_utils.streaming._interrupts import interrupt_chunk

__all__ = [
    "RECURSION_LIMIT",
    "Decisions",
    "Interrupt",
    "ModelT",
    "RunResult",
    "aresume_input",
    "astream_run",
    "check_call",
    "check_thread",
    "final_result",
    "resume_input",
    "run_config",
    "start_input",
    "stream_run",
]

RECURSION_LIMIT = 200
"""LangGraph's default (25 steps, about 12 tool rounds) is too low for real agents; bound runs with
``max_iterations`` instead."""

Decisions = Sequence[Decision] | Mapping[str, Decision]
Interrupt = InterruptEvent | InterruptBatch
RunResult = str | BaseModel | Interrupt
"""What a run returns before the wrapper types it: the text, the ``output`` instance, or the interrupt chunk."""
ModelT = TypeVar("ModelT", bound=BaseModel)
"""The ``output`` model of a wrapper built with ``output=`` (its ``invoke`` returns an instance)."""


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
    """A new user turn: a str, one message, or a list of messages."""
    if isinstance(input, str):
        return {"messages": [HumanMessage(input)]}
    if isinstance(input, BaseMessage):
        return {"messages": [input]}
    if isinstance(input, list) and all(isinstance(m, BaseMessage) for m in input):
        return {"messages": list(input)}
    raise UserError(f"`input` must be a str (or LangChain messages), got {input!r}.")


def _continue_or_resume(
    state: StateSnapshot,
    config: RunnableConfig,
    decision: Decision | None,
    decisions: Decisions | None,
    idle: str | None = None,
) -> Command[Any] | None:
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


def resume_input(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    config: RunnableConfig,
    decision: Decision | None,
    decisions: Decisions | None,
    *,
    idle: str | None = None,
) -> Command[Any] | None:
    """The resume command for the thread's pending interrupts, or ``None`` to continue an unfinished run.

    Args:
        graph: the wrapper's compiled graph.
        config: the run's config (names the thread).
        decision: one answer for every pending item.
        decisions: one answer per pending item.
        idle: the wrapper's message for a decision when nothing is pending (default: the decision mapper's).

    Raises:
        UserError: no decision while an approval waits, a decision with nothing pending, or nothing to continue.
    """
    return _continue_or_resume(graph.get_state(config), config, decision, decisions, idle)


async def aresume_input(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    config: RunnableConfig,
    decision: Decision | None,
    decisions: Decisions | None,
    *,
    idle: str | None = None,
) -> Command[Any] | None:
    """Async twin of `resume_input`."""
    return _continue_or_resume(await graph.aget_state(config), config, decision, decisions, idle)


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


def stream_run(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    graph_input: Any,
    config: RunnableConfig,
    adapter: ChunkAdapter,
    *,
    context: Any = None,
    durability: Durability | None = None,
) -> Iterator[StreamChunk]:
    """Stream one run as client chunks (sync)."""
    parts = graph.stream(graph_input, config, context=context, durability=durability, **stream_kwargs())
    return adapt(parts, adapter)


def astream_run(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    graph_input: Any,
    config: RunnableConfig,
    adapter: ChunkAdapter,
    *,
    context: Any = None,
    durability: Durability | None = None,
) -> AsyncIterator[StreamChunk]:
    """Stream one run as client chunks (async)."""
    parts = graph.astream(graph_input, config, context=context, durability=durability, **stream_kwargs())
    return aadapt(parts, adapter)
