"""The LangGraph graph of `JevToolCaller`: top-level node functions, each a sync/async pair on one core.

```
START ─┬─ select_tool ── resolve_params ─┬─ select_params ── gate ─┬─ approval ─┬─ execute ── END
       │  (Jev call 1)                   ├──────────────────────── gate        └─ END (reject)
       └─ (call_tool) ── resolve_params ─┴─ execute                ├─ execute
                                                                    └─ END (gated)
```

Everything a run needs but must never be checkpointed travels in `RunContext`, the LangGraph *runtime
context*: the validated user ``context``, the tools of this run (MCP tools live only while their
session is open), the Jev client, the candidate objects and ``func``'s return value. The checkpointed
state holds only JSON: the request, the history, and per parameter the picked index and its JSON
rendering (see `_tool_caller_core`).
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
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from ai_utils._compat.langgraph import RunnableCallable
from ai_utils._utils import is_async_callable, run_sync
from ai_utils.exceptions import UserError
from ai_utils.jev import _tool_caller_core as core
from ai_utils.jev._tool_caller_types import ConfidenceGate, JevParamsError, JevProposalChangedError
from ai_utils.jev.client import JevClient, ssl_context
from ai_utils.jev.questions import ClassifyResult

__all__ = ["RunContext", "ToolCallerState", "build_graph", "fresh_input"]

Graph = CompiledStateGraph[Any, Any, Any, Any]


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


def _run() -> RunContext:
    context: RunContext = get_runtime(RunContext).context
    return context


# --- calling user code ------------------------------------------------------------------------------------


def _call_sync(fn: Callable[..., Any], available: Mapping[str, Any]) -> Any:
    kwargs = core.call_kwargs(fn, available)
    if is_async_callable(fn):
        return run_sync(lambda: fn(**kwargs), what="JevToolCaller.invoke with an async callable")
    result = fn(**kwargs)
    if inspect.isawaitable(result):
        return run_sync(_awaited(result), what="JevToolCaller.invoke with an async callable")
    return result


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


async def _call_async(fn: Callable[..., Any], available: Mapping[str, Any]) -> Any:
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


def _resolve_sync(run: RunContext, tool: core.ToolEntry, state: Mapping[str, Any]) -> dict[str, list[Any]]:
    if run.candidates is None:
        provider, available = _params_call(run, tool, state)
        raw = {} if provider is None else _call_sync(provider, available) if callable(provider) else provider
        run.candidates = core.check_candidates(tool.name, raw)
    return run.candidates


async def _resolve_async(run: RunContext, tool: core.ToolEntry, state: Mapping[str, Any]) -> dict[str, list[Any]]:
    if run.candidates is None:
        provider, available = _params_call(run, tool, state)
        raw = {} if provider is None else await _call_async(provider, available) if callable(provider) else provider
        run.candidates = core.check_candidates(tool.name, raw)
    return run.candidates


# --- select_tool: Jev call 1 ------------------------------------------------------------------------------


def _tool_update(state: Mapping[str, Any], result: ClassifyResult[Any]) -> dict[str, Any]:
    answer = result.answers[core.TOOL_QUESTION]
    tool = {"name": answer.choice, "confidence": answer.confidence, "probabilities": dict(answer.probabilities)}
    return {"tool": tool, "usage": core.add_usage(state.get("usage"), result)}


def select_tool(state: ToolCallerState) -> dict[str, Any]:
    """Ask Jev which tool carries out the request."""
    run = _run()
    questions = core.tool_question(list(run.tools.values()))
    return _tool_update(state, run.jev.classify(run.state_for(state), questions, timeout=run.timeout))


async def aselect_tool(state: ToolCallerState) -> dict[str, Any]:
    """Async `select_tool`."""
    run = _run()
    questions = core.tool_question(list(run.tools.values()))
    result = await run.jev._aclassify_with(run.http(), run.state_for(state), questions, model=None, timeout=run.timeout)
    return _tool_update(state, result)


# --- resolve_params ---------------------------------------------------------------------------------------


def _after_resolve(
    state: Mapping[str, Any], run: RunContext, name: str, candidates: dict[str, list[Any]]
) -> Command[Any]:
    if state.get("forced"):
        return Command(goto="execute", update={"params": _forced_params(name, candidates, run.forced_params or {})})
    picked = {n: core.selection(c, 0, 1.0, deterministic=True) for n, c in candidates.items() if len(c) == 1}
    pending = [n for n, c in candidates.items() if len(c) > 1]
    return Command(goto="select_params" if pending else "gate", update={"params": picked, "pending": pending})


def _forced_params(tool: str, candidates: Mapping[str, list[Any]], given: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(candidates))
    missing = sorted(set(candidates) - set(given))
    if unknown or missing:
        raise JevParamsError(
            f"call_tool: tool {tool!r} takes the parameters {sorted(candidates)!r}; "
            f"unknown: {unknown!r}, missing: {missing!r}. Pass exactly one candidate value per parameter."
        )
    return {
        name: core.selection(values, core.match_value(tool, name, values, given[name]), 1.0)
        for name, values in candidates.items()
    }


def resolve_params(state: ToolCallerState) -> Command[Any]:
    """Evaluate the picked tool's ``params`` (only that tool's) into candidate lists."""
    run = _run()
    name = _tool_name(state)
    return _after_resolve(state, run, name, _resolve_sync(run, run.tool(name), state))


async def aresolve_params(state: ToolCallerState) -> Command[Any]:
    """Async `resolve_params`."""
    run = _run()
    name = _tool_name(state)
    return _after_resolve(state, run, name, await _resolve_async(run, run.tool(name), state))


def _tool_name(state: Mapping[str, Any]) -> str:
    tool = state.get("tool")
    assert tool is not None  # set by select_tool or by call_tool's input
    return str(tool["name"])


# --- select_params: Jev call 2 ----------------------------------------------------------------------------


def _param_plan(
    state: Mapping[str, Any], run: RunContext
) -> tuple[dict[str, Any], dict[str, str], dict[str, list[str]]]:
    assert run.candidates is not None  # resolved in this run by resolve_params
    return core.param_questions(run.tool(_tool_name(state)), state.get("pending") or [], run.candidates)


def _params_update(
    state: Mapping[str, Any], run: RunContext, ids: Mapping[str, str], labels: Mapping[str, list[str]],
    result: ClassifyResult[Any],
) -> dict[str, Any]:  # fmt: skip
    assert run.candidates is not None
    picked = dict(state.get("params") or {})
    for qid, name in ids.items():
        answer = result.answers[qid]
        picked[name] = core.selection(
            run.candidates[name], core.pick_index(labels[name], answer.choice), answer.confidence
        )
    ordered = {name: picked[name] for name in run.candidates}
    return {"params": ordered, "usage": core.add_usage(state.get("usage"), result)}


def select_params(state: ToolCallerState) -> dict[str, Any]:
    """Ask Jev, in one request, which candidate each ambiguous parameter takes."""
    run = _run()
    questions, ids, labels = _param_plan(state, run)
    result = run.jev.classify(run.state_for(state), questions, timeout=run.timeout)
    return _params_update(state, run, ids, labels, result)


async def aselect_params(state: ToolCallerState) -> dict[str, Any]:
    """Async `select_params`."""
    run = _run()
    questions, ids, labels = _param_plan(state, run)
    result = await run.jev._aclassify_with(run.http(), run.state_for(state), questions, model=None, timeout=run.timeout)
    return _params_update(state, run, ids, labels, result)


# --- gate (+ the approval question) -----------------------------------------------------------------------


def _objects(run: RunContext, params: Mapping[str, Any]) -> dict[str, Any]:
    assert run.candidates is not None
    return {name: run.candidates[name][picked["index"]] for name, picked in params.items()}


def _gate(state: Mapping[str, Any], run: RunContext) -> tuple[Command[Any] | None, dict[str, Any]]:
    tool = state["tool"]
    params = state.get("params") or {}
    below = core.gate_below(run.gate, tool["name"], tool["confidence"], params)
    if below:
        return Command(goto=END, update={"below": below, "outcome": "gated"}), {}
    if tool["name"] not in run.interrupt_on:
        return Command(goto="execute"), {}
    available = {"tool": tool["name"], "params": _objects(run, params), **run.provided(state)}
    return None, available


def gate(state: ToolCallerState) -> Command[Any]:
    """The confidence gate (always on, before ``interrupt_on``); then ask for approval or execute."""
    run = _run()
    done, available = _gate(state, run)
    if done is not None:
        return done
    question = run.interrupt_on[state["tool"]["name"]]  # type: ignore[index]
    text = _call_sync(question, available) if callable(question) else question
    return Command(goto="approval", update={"question": str(text)})


async def agate(state: ToolCallerState) -> Command[Any]:
    """Async `gate`."""
    run = _run()
    done, available = _gate(state, run)
    if done is not None:
        return done
    question = run.interrupt_on[state["tool"]["name"]]  # type: ignore[index]
    text = await _call_async(question, available) if callable(question) else question
    return Command(goto="approval", update={"question": str(text)})


# --- approval: the human in the loop ----------------------------------------------------------------------


def approval(state: ToolCallerState) -> Command[Any]:
    """Pause with the proposal (``interrupt``); resume with ``"approve"`` (execute) or ``"reject"`` (end)."""
    run = _run()
    run.state_for(state)
    tool = state["tool"]
    assert tool is not None
    params = state.get("params") or {}
    proposal = {
        "question": state.get("question") or "",
        "tool": {"name": tool["name"], "confidence": tool["confidence"]},
        "params": {name: {"value": p["value"], "confidence": p["confidence"]} for name, p in params.items()},
    }
    if interrupt(proposal) == "approve":
        return Command(goto="execute")
    arguments = {name: p["value"] for name, p in params.items()}
    history = _with_request(state, core.assistant_entry(tool["name"], arguments, rejected=True))
    return Command(goto=END, update={"outcome": "rejected", "message_history": history})


def _with_request(state: Mapping[str, Any], entry: dict[str, Any]) -> list[dict[str, Any]]:
    request = state.get("request")
    return [entry] if request is None else [core.user_entry(request), entry]


# --- execute ----------------------------------------------------------------------------------------------


def _arguments(
    state: Mapping[str, Any], run: RunContext, tool: str, candidates: Mapping[str, list[Any]]
) -> dict[str, Any]:
    params = state.get("params") or {}
    if set(params) != set(candidates):
        raise JevProposalChangedError(
            f"Tool {tool!r}: its `params` now give the parameters {sorted(candidates)!r}, not the proposed "
            f"{sorted(params)!r}, so nothing ran. Send the request again to get a new proposal."
        )
    arguments = {
        name: candidates[name][core.recover_index(tool, name, candidates[name], picked)]
        for name, picked in params.items()
    }
    run.arguments = arguments
    return {**run.provided(state), "params": dict(arguments)}


def _executed(state: Mapping[str, Any], run: RunContext, tool: str, value: Any) -> dict[str, Any]:
    run.value = value
    arguments = {name: p["value"] for name, p in (state.get("params") or {}).items()}
    history = _with_request(state, core.assistant_entry(tool, arguments, value))
    return {"outcome": "return", "message_history": history}


def execute(state: ToolCallerState) -> dict[str, Any]:
    """Run the picked tool's ``func`` exactly once with the picked original candidates."""
    run = _run()
    tool = run.tool(_tool_name(state))
    available = _arguments(state, run, tool.name, _resolve_sync(run, tool, state))
    return _executed(state, run, tool.name, _call_sync(tool.func, available))


async def aexecute(state: ToolCallerState) -> dict[str, Any]:
    """Async `execute`."""
    run = _run()
    tool = run.tool(_tool_name(state))
    available = _arguments(state, run, tool.name, await _resolve_async(run, tool, state))
    return _executed(state, run, tool.name, await _call_async(tool.func, available))


# --- wiring -----------------------------------------------------------------------------------------------


def _start(state: ToolCallerState) -> str:
    return "resolve_params" if state.get("forced") else "select_tool"


async def _pure(fn: Callable[[ToolCallerState], Any], state: ToolCallerState) -> Any:
    return fn(state)


def _node(sync: Callable[[ToolCallerState], Any], asynchronous: Callable[[ToolCallerState], Any] | None = None) -> Any:
    # The sync/async node pair LangChain's own `create_agent` uses; untraced nodes cost ~1 ms less per run.
    return RunnableCallable(sync, asynchronous or functools.partial(_pure, sync), name=sync.__name__, trace=False)


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None) -> Graph:
    """Compile the tool caller's graph (one per `JevToolCaller`; tools come with each run's context)."""
    graph = StateGraph(ToolCallerState, context_schema=RunContext)
    graph.add_node("select_tool", _node(select_tool, aselect_tool))
    graph.add_node(
        "resolve_params", _node(resolve_params, aresolve_params), destinations=("select_params", "gate", "execute")
    )
    graph.add_node("select_params", _node(select_params, aselect_params))
    graph.add_node("gate", _node(gate, agate), destinations=("approval", "execute", END))
    graph.add_node("approval", _node(approval), destinations=("execute", END))
    graph.add_node("execute", _node(execute, aexecute))
    graph.add_conditional_edges(START, _start, ["select_tool", "resolve_params"])
    graph.add_edge("select_tool", "resolve_params")
    graph.add_edge("select_params", "gate")
    graph.add_edge("execute", END)
    return graph.compile(checkpointer=checkpointer, name="JevToolCaller")
