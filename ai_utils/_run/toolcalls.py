"""The pieces of one tool call in the tool loop: errors as results, `ToolResult`, the gate for writers.

A raised error becomes the model's tool result, a `ToolResult` is read, and a writing tool runs alone.

**Errors.** `error_result` turns an exception into ``ToolMessage(status="error")`` with the content
``"<ExceptionClass>: <message>"``: the run's ``context`` values (strings of 4+ characters, numbers of 4+ digits,
``SecretStr`` values) replaced by ``[REDACTED:context]``, secret shapes redacted as guardrails do
(`ai_utils._secrets`), cut to 2,000 characters. A context too large or too deep to check withholds the message.

**ToolResult.** A tool's return value becomes its ``ToolMessage`` inside LangChain's ``BaseTool.run``, which
turns any other object into its ``str`` before a middleware sees it. So `results_tool` gives the call a copy of
the tool (made once per tool) whose function hands a `ToolResult` over as the message's artifact, with the JSON
(and images) as its content; `from_result` then sets the status, takes the action out and drops the artifact, so
the thread never stores it. The same copy notes the errors the tool itself raises (`raised_by_tool`).

**Order.** `create_agent` sends each tool call of a model reply to the tool node as its own task, and LangGraph
runs a step's tasks at once (threads on the sync path, tasks on the event loop). ToolNode has no option for
order, so the order is kept where every call passes anyway, in the tool-call middleware: the first call of a
reply to arrive builds one `Gate` for the reply's calls that run in this step (in reply order), and each call
waits there until the calls it must follow have ended — every earlier call for a writer, every earlier writer
for any other call. A reply without writers gets no gate (one dict lookup per further call). Calls answered
before the step (results already stored, or finished before a crash: ``RunRecord.ended``) are not waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from pydantic import BaseModel, SecretBytes, SecretStr

from ai_utils._run.record import RunRecord
from ai_utils._secrets import redact_secrets
from ai_utils.tools.results import ToolResult

__all__ = [
    "ARRIVAL_TIMEOUT",
    "MAX_ERROR_CHARS",
    "Gate",
    "WritesDefault",
    "Gates",
    "error_result",
    "error_text",
    "from_result",
    "raised_by_tool",
    "results_tool",
    "tool_errors_box",
]

logger = logging.getLogger("ai_utils.agents")

MAX_ERROR_CHARS = 2000
"""A tool error's text is cut to this many characters."""

ARRIVAL_TIMEOUT = 60.0
"""How long a call waits for an earlier call of its reply to *reach* the gate (all of a step's calls are started
together, so this is only a safety net for a call that will never come, e.g. one a crashed run finished before
a graph driven by hand was continued); once arrived, a call is waited for until it ends, however long."""

WritesDefault = Callable[[str, BaseTool | None], bool]
"""``(tool name, tool) -> writes`` for a tool whose metadata does not say (durable sessions: not idempotent)."""

_CONTEXT_MARK = "[REDACTED:context]"
_MIN_SECRET = 4
_MAX_VALUES = 512
_MAX_DEPTH = 8


class _TooLarge(Exception):
    """The context has more values (or nesting) than an error message is checked against."""


def _leaf(value: Any) -> str | None:
    """The text of a value that holds no others (``None``: a container, or nothing to hide)."""
    if isinstance(value, str):
        return value
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, SecretBytes):
        return value.get_secret_value().decode(errors="replace")
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = str(value)
        return text if sum(c.isdigit() for c in text) >= _MIN_SECRET else None
    return None


def _children(value: Any) -> list[Any] | None:
    """The values a container holds (``None``: not a container)."""
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, BaseModel):
        return [getattr(value, name, None) for name in type(value).model_fields]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name, None) for f in dataclasses.fields(value)]
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    return None


def _context_values(context: Any) -> list[str]:
    """The strings an error message must not show: the context's str/number/secret values, longest first."""
    found: list[str] = []
    stack: list[tuple[Any, int]] = [(context, 0)]
    while stack:
        value, depth = stack.pop()
        if value is None or isinstance(value, bool):
            continue
        text = _leaf(value)
        if text is None:
            children = _children(value)
            if children is None:
                text = str(value)  # any other object: its text is what could show up in a message
            elif depth >= _MAX_DEPTH:
                raise _TooLarge
            else:
                stack.extend((child, depth + 1) for child in children)
        if text is not None:
            found.append(text)
            if len(found) > _MAX_VALUES:
                raise _TooLarge
    texts = {v for v in found if len(v) >= _MIN_SECRET}
    # A message that quotes the context (`f"{ctx!r}"`, JSON) shows a value with its quotes and backslashes escaped.
    texts.update(
        [
            quoted
            for v in texts
            for quoted in (repr(v)[1:-1], json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1])
        ]
    )
    return sorted(texts, key=len, reverse=True)


def error_text(error: BaseException, context: Any) -> str:
    """``"<ExceptionClass>: <message>"`` without context values or secret shapes, at most 2,000 characters."""
    name = type(error).__name__
    try:
        message = str(error)
    except Exception:  # the error's own __str__ is broken: the model still gets its class, and the run goes on
        message = ""
    if message and context is not None:
        try:
            for value in _context_values(context):
                message = message.replace(value, _CONTEXT_MARK)
        except _TooLarge:
            message = "(message withheld: the run's context is too large to check it for context values)"
    text = f"{name}: {message}" if message else name
    return redact_secrets(text)[0][:MAX_ERROR_CHARS]


_TOOL_FRAMES = frozenset({BaseTool.run.__code__, BaseTool.arun.__code__})

# The errors the running call's tool function raised (set around the call by the tool loop, read by `own_call`).
_RAISED: ContextVar[list[BaseException] | None] = ContextVar("ai_utils_tool_raised", default=None)


@contextlib.contextmanager
def tool_errors_box() -> Iterator[list[BaseException]]:
    """Inside the block, the errors the tool function of the call run here raises are noted in the list."""
    box: list[BaseException] = []
    token = _RAISED.set(box)
    try:
        yield box
    finally:
        _RAISED.reset(token)


def _note(error: BaseException) -> None:
    box = _RAISED.get()
    if box is not None:
        box.append(error)


def raised_by_tool(error: BaseException, box: Sequence[BaseException]) -> bool:
    """Whether ``error`` came out of the tool itself, not out of a middleware between the tool loop and the tool.

    The tool loop sits outside the other middleware (it must, to keep each call's place in its reply's order),
    so an exception it sees may also come from a middleware inside it — a hook that raises, a policy that
    refuses; only the tool's own errors go to the model. A tool the loop runs through its copy (`results_tool`)
    notes its errors in ``box`` (compared by type and arguments too: asyncio hands a ``TimeoutError`` from a
    worker thread over as a new one). Any other tool is recognised by its traceback: every LangChain tool runs
    through ``BaseTool.run``/``arun``.
    """
    for raised in box:
        if raised is error or (type(raised) is type(error) and raised.args == error.args):
            return True
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in _TOOL_FRAMES:
            return True
        tb = tb.tb_next
    return False


def error_result(request: ToolCallRequest, error: BaseException) -> ToolMessage:
    """The failed tool result the model gets for ``error`` (see `error_text`)."""
    call = request.tool_call
    context = getattr(request.runtime, "context", None)
    logger.info("Tool %r raised %s; the model gets it as a failed result.", call["name"], type(error).__name__)
    return ToolMessage(error_text(error, context), tool_call_id=call["id"], name=call["name"], status="error")


# --- ToolResult -----------------------------------------------------------------------------------------------


def results_tool(tool: BaseTool, *, with_images: bool) -> BaseTool:
    """A copy of ``tool`` that notes its errors and hands a `ToolResult` to `from_result`.

    A ``StructuredTool`` gets wrapped functions; any other ``BaseTool`` (a subclass with its own ``_run``) becomes
    an instance of a subclass that wraps ``_run``/``_arun`` (`_results_class`). A tool that already returns
    ``(content, artifact)`` keeps doing so. ``functools.wraps`` keeps the signature LangChain reads for injected
    ``config``/``callbacks``/runtime.
    """
    reads = tool.response_format == "content"
    if not isinstance(tool, StructuredTool):
        if not reads:
            return tool
        copy = tool.model_copy(update={"response_format": "content_and_artifact"})
        # LangChain calls the class's `_run`/`_arun`; a subclass is the one place to put the wrapper.
        object.__setattr__(copy, "__class__", _results_class(type(tool), with_images))
        return copy

    def split(value: Any) -> Any:
        if not reads:
            return value
        return _split(value, with_images)

    update: dict[str, Any] = {"response_format": "content_and_artifact"} if reads else {}
    func, coroutine = tool.func, tool.coroutine
    if func is not None:

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return split(func(*args, **kwargs))
            except Exception as error:
                _note(error)
                raise

        update["func"] = run
    if coroutine is not None:

        @functools.wraps(coroutine)
        async def arun(*args: Any, **kwargs: Any) -> Any:
            try:
                return split(await coroutine(*args, **kwargs))
            except Exception as error:
                _note(error)
                raise

        update["coroutine"] = arun
    return tool.model_copy(update=update)


def _split(value: Any, with_images: bool) -> tuple[Any, ToolResult | None]:
    if isinstance(value, ToolResult):
        return value.content(with_images=with_images), value
    return value, None


@functools.cache
def _results_class(base: type[BaseTool], with_images: bool) -> type[BaseTool]:
    """A subclass of ``base`` whose ``_run`` (and own ``_arun``) note errors and return ``(content, ToolResult)``.

    ``BaseTool._arun`` runs ``self._run`` in a thread: only an ``_arun`` of the tool's own is wrapped, so a
    result is split once.
    """
    run = base._run

    def _run(self: BaseTool, *args: Any, **kwargs: Any) -> Any:
        try:
            return _split(run(self, *args, **kwargs), with_images)
        except Exception as error:
            _note(error)
            raise

    namespace: dict[str, Any] = {
        "_run": functools.update_wrapper(_run, run),
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
    }
    if base._arun is not BaseTool._arun:
        arun = base._arun

        async def _arun(self: BaseTool, *args: Any, **kwargs: Any) -> Any:
            try:
                return _split(await arun(self, *args, **kwargs), with_images)
            except Exception as error:
                _note(error)
                raise

        namespace["_arun"] = functools.update_wrapper(_arun, arun)
    return type(base.__name__, (base,), namespace)


def from_result(message: ToolMessage, record: RunRecord | None) -> ToolMessage:
    """``message`` without its `ToolResult` artifact: status from the result, the action collected on ``record``."""
    result = message.artifact
    if not isinstance(result, ToolResult):
        return message
    if result.action is not None and record is not None:
        record.actions.append(result.action)
    status = "error" if result.status == "error" else message.status
    return message.model_copy(update={"artifact": None, "status": status})


# --- the ordering gate ----------------------------------------------------------------------------------------


class Gate:
    """The calls of one model reply that run in one tool step, in reply order, and what each must wait for.

    Args:
        ids: the step's call ids in reply order.
        deps: per call, the indices of the earlier calls that must end before it starts.
        is_async: events for tasks on one event loop (``True``) or for threads.
    """

    __slots__ = ("arrived", "deps", "ended", "index")

    def __init__(self, ids: Sequence[str], deps: Sequence[Sequence[int]], *, is_async: bool) -> None:
        self.index = {call_id: i for i, call_id in enumerate(ids)}
        self.deps = deps
        make: Callable[[], Any] = asyncio.Event if is_async else threading.Event
        self.arrived = [make() for _ in ids]
        self.ended = [make() for _ in ids]

    def _arrive(self, call_id: str) -> int | None:
        i = self.index.get(call_id)
        if i is not None:
            self.arrived[i].set()
        return i

    def _late(self, j: int) -> None:
        logger.warning("A tool call that an ordered call waits for never started; the ordered call runs now.")
        self.ended[j].set()

    def enter(self, call_id: str) -> int | None:
        """Block this thread until the call may start; its index (``None``: not one of the gate's calls)."""
        i = self._arrive(call_id)
        if i is not None:
            for j in self.deps[i]:
                if not self.arrived[j].wait(ARRIVAL_TIMEOUT):
                    self._late(j)
                self.ended[j].wait()
        return i

    async def aenter(self, call_id: str) -> int | None:
        """Async twin of `enter`."""
        i = self._arrive(call_id)
        if i is not None:
            for j in self.deps[i]:
                try:
                    await asyncio.wait_for(self.arrived[j].wait(), ARRIVAL_TIMEOUT)
                except TimeoutError:
                    self._late(j)
                await self.ended[j].wait()
        return i

    def leave(self, i: int | None) -> None:
        """The call ``i`` ended (with a result or an error): the calls after it may go on."""
        if i is not None:
            self.ended[i].set()


def _reply(messages: Sequence[Any]) -> tuple[AIMessage | None, set[str]]:
    """The last AI message and the ids of the tool results after it."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            return message, answered
    return None, answered


def _writes(tool: BaseTool | None, name: str, default: WritesDefault | None) -> bool:
    declared = (tool.metadata or {}).get("writes") if tool is not None else None
    if isinstance(declared, bool):
        return declared
    return default(name, tool) if default is not None else False


def _messages(request: ToolCallRequest) -> list[Any] | None:
    state = request.state
    messages = state.get("messages") if isinstance(state, dict) else None
    return messages if isinstance(messages, list) else None


def _writers(request: ToolCallRequest, calls: Sequence[Any], default: WritesDefault | None) -> list[bool]:
    names = {c["name"] for c in calls}
    flags = {
        t.name: _writes(t, t.name, default) for t in getattr(request.runtime, "tools", None) or () if t.name in names
    }
    return [flags[c["name"]] if c["name"] in flags else _writes(None, c["name"], default) for c in calls]


def _build(
    request: ToolCallRequest, record: RunRecord | None, *, alone: bool, default: WritesDefault | None, is_async: bool
) -> tuple[Any, Gate | None]:
    """The reply's key and its gate (``None`` when no call of this step writes and calls may overlap)."""
    messages = _messages(request)
    if messages is None:
        return None, None
    message, answered = _reply(messages)
    if message is None:
        return None, None
    key = message.id or id(message)
    calls = message.tool_calls
    if len(calls) < 2:
        return key, None
    ended = record.ended if record is not None else frozenset()
    if answered or ended:
        calls = [c for c in calls if c["id"] not in answered and c["id"] not in ended]
        if len(calls) < 2:
            return key, None
    writes = [True] * len(calls) if alone else _writers(request, calls, default)
    if not any(writes):
        return key, None
    deps = [[j for j in range(i) if writes[i] or writes[j]] for i in range(len(calls))]
    return key, Gate([str(c["id"]) for c in calls], deps, is_async=is_async)


class Gates:
    """The gates of one middleware's replies: on the run's `RunRecord`, or here for a graph driven by hand."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loose: dict[Any, Gate] = {}

    def get(
        self, request: ToolCallRequest, record: RunRecord | None, *, alone: bool, default: WritesDefault | None,
        is_async: bool,
    ) -> Gate | None:  # fmt: skip
        """The gate of this call's reply, made by the first of its calls to arrive (``None``: no ordering)."""
        store: dict[Any, Any] = record.gates if record is not None else self._loose
        scope = None if record is not None else _scope(request)
        messages = _messages(request)
        last = messages[-1] if messages else None
        if isinstance(last, AIMessage) and last.id is not None:
            found = store.get((scope, last.id))
            if found is not None:
                return found or None
        with self._lock:
            key, gate = _build(request, record, alone=alone, default=default, is_async=is_async)
            if key is None:
                return None
            if gate is None:
                if record is not None:
                    store.setdefault((scope, key), False)  # the reply's other calls skip the work above
                return None
            found = store.setdefault((scope, key), gate)
            return found or None

    def release(self, record: RunRecord | None, gate: Gate) -> None:
        """Forget a loose gate once all its calls have ended (a record's gates go with the record)."""
        if record is not None or not all(e.is_set() for e in gate.ended):
            return
        with self._lock:
            for key in [k for k, v in self._loose.items() if v is gate]:
                del self._loose[key]


def _scope(request: ToolCallRequest) -> Any:
    # The tasks of one step share the thread, the checkpoint they start from and their parent namespace.
    info = getattr(request.runtime, "execution_info", None)
    namespace = str(getattr(info, "checkpoint_ns", "") or "").rpartition("|")[0]
    return (getattr(info, "thread_id", None), namespace, getattr(info, "checkpoint_id", None))
