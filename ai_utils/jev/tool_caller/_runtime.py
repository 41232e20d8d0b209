"""What one `JevToolCaller` run carries outside its checkpoint, and how the graph calls user code.

Everything a run needs but must never be checkpointed travels in `RunContext`, the LangGraph *runtime
context*: the validated user ``context``, the tools of this run (MCP tools live only while their
session is open), the Jev client, the candidate objects and ``func``'s return value. The checkpointed
state (`ToolCallerState`) holds only JSON: the request, the history, and per parameter the picked index
and its JSON rendering (see `_core`).
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio.to_thread
import httpx
from langgraph.runtime import get_runtime
from typing_extensions import TypedDict

from ai_utils._utils import is_async_callable, run_sync
from ai_utils.exceptions import UserError
from ai_utils.jev.client import JevClient, ssl_context
from ai_utils.jev.tool_caller import _core as core
from ai_utils.jev.tool_caller._types import ConfidenceGate

__all__ = [
    "RunContext",
    "ToolCallerState",
    "call_async",
    "call_sync",
    "current_run",
    "fresh_input",
    "resolve_async",
    "resolve_sync",
]


class ToolCallerState(TypedDict, total=False):
    """The checkpointed state: JSON only, never ``context`` and never candidate objects."""

    message_history: Annotated[list[dict[str, Any]], operator.add]
    request: dict[str, Any] | None
    forced: bool
    tool: dict[str, Any] | None
    params: dict[str, dict[str, Any]]
    pending: list[str]
    below: list[dict[str, Any]]
    question: str | None
    outcome: str | None
    usage: dict[str, Any] | None


def fresh_input(request: dict[str, Any] | None, *, forced_tool: str | None = None) -> dict[str, Any]:
    """The graph input of a new request: resets every per-request field (replacing a pending proposal)."""
    tool = None if forced_tool is None else {"name": forced_tool, "confidence": 1.0, "probabilities": None}
    return {
        "request": request,
        "forced": forced_tool is not None,
        "tool": tool,
        "params": {},
        "pending": [],
        "below": [],
        "question": None,
        "outcome": None,
        "usage": None,
    }


@dataclass(eq=False)
class RunContext:
    """One run's non-persistent data (LangGraph runtime context). Its repr shows no user data."""

    prompt: str
    tools: Mapping[str, core.ToolEntry]
    jev: JevClient = field(repr=False)
    gate: ConfidenceGate
    interrupt_on: Mapping[str, str | Callable[..., Any]] = field(repr=False)
    context: Any = field(default=None, repr=False)
    thread_id: str | None = None
    timeout: float | None = None
    forced_params: Mapping[str, Any] | None = field(default=None, repr=False)
    candidates: dict[str, list[Any]] | None = field(default=None, repr=False)
    arguments: dict[str, Any] | None = field(default=None, repr=False)
    value: Any = field(default=None, repr=False)
    seen_state: dict[str, Any] | None = field(default=None, repr=False)
    _http: httpx.AsyncClient | None = field(default=None, repr=False)

    def tool(self, name: str) -> core.ToolEntry:
        """The run's tool called ``name``."""
        try:
            return self.tools[name]
        except KeyError:
            raise UserError(
                f"Tool {name!r} is not among this run's tools {sorted(self.tools)!r}; an MCP server may no longer "
                "offer it. Send the request again."
            ) from None

    def state_for(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """``{system_prompt, message_history}`` with the current request last (built once per run)."""
        if self.seen_state is None:
            self.seen_state = core.jev_state(self.prompt, state.get("message_history") or [], state.get("request"))
        return self.seen_state

    def provided(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """What a user callable may receive (context is passed to user code, never stored)."""
        return {"context": self.context, "state": _copy(self.state_for(state)), "thread_id": self.thread_id}

    def http(self) -> httpx.AsyncClient:
        """The run's async HTTP client for Jev, created on first use; closed by `aclose`."""
        if self._http is None:
            self._http = httpx.AsyncClient(verify=ssl_context())
        return self._http

    async def aclose(self) -> None:
        """Close the run's async HTTP client."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def _copy(state: Mapping[str, Any]) -> dict[str, Any]:
    return {"system_prompt": state["system_prompt"], "message_history": [dict(e) for e in state["message_history"]]}


def current_run() -> RunContext:
    """The `RunContext` of the graph run this node belongs to."""
    context: RunContext = get_runtime(RunContext).context
    return context


# --- calling user code ------------------------------------------------------------------------------------


def call_sync(fn: Callable[..., Any], available: Mapping[str, Any]) -> Any:
    """Call user code ``fn`` (sync or async) from a sync node with the keyword arguments it declares."""
    kwargs = core.call_kwargs(fn, available)
    if is_async_callable(fn):
        return run_sync(lambda: fn(**kwargs), what="JevToolCaller.invoke with an async callable")
    result = fn(**kwargs)
    if inspect.isawaitable(result):
        return run_sync(_awaited(result), what="JevToolCaller.invoke with an async callable")
    return result


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


async def call_async(fn: Callable[..., Any], available: Mapping[str, Any]) -> Any:
    """Call user code ``fn`` (sync or async) from an async node with the keyword arguments it declares."""
    kwargs = core.call_kwargs(fn, available)
    if is_async_callable(fn):
        return await fn(**kwargs)
    # Sync user code runs in a worker thread, like LangChain's sync tools: it may block or call sync APIs.
    result = await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))
    if inspect.isawaitable(result):
        result = await result
    return result


def _params_call(run: RunContext, tool: core.ToolEntry, state: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    available = run.provided(state)
    if tool.server is not None:
        available["server"] = tool.server
    return tool.params, available


def resolve_sync(run: RunContext, tool: core.ToolEntry, state: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The candidate lists of ``tool`` for this run (its ``params`` are evaluated once per run)."""
    if run.candidates is None:
        provider, available = _params_call(run, tool, state)
        raw = {} if provider is None else call_sync(provider, available) if callable(provider) else provider
        run.candidates = core.check_candidates(tool.name, raw)
    return run.candidates


async def resolve_async(run: RunContext, tool: core.ToolEntry, state: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Async `resolve_sync`."""
    if run.candidates is None:
        provider, available = _params_call(run, tool, state)
        raw = {} if provider is None else await call_async(provider, available) if callable(provider) else provider
        run.candidates = core.check_candidates(tool.name, raw)
    return run.candidates
