"""The LangGraph graph of `JevToolCaller`: top-level node functions, each a sync/async pair on one core.

```
START ─┬─ select_tool ── resolve_params ─┬─ select_params ── gate ─┬─ approval ─┬─ execute ── END
       │  (Jev call 1)                   ├──────────────────────── gate        └─ END (reject)
       └─ (call_tool) ── resolve_params ─┴─ execute                ├─ execute
                                                                    └─ END (gated)
```

The nodes read the run's non-persistent data (`RunContext`, see `_runtime`) from the LangGraph runtime
and write only JSON to the checkpointed state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from ai_utils._compat.langgraph import RunnableCallable
from ai_utils.jev.questions import ClassifyResult
from ai_utils.jev.tool_caller import _core as core
from ai_utils.jev.tool_caller._runtime import (
    RunContext,
    ToolCallerState,
    call_async,
    call_sync,
    current_run,
    resolve_async,
    resolve_sync,
)
from ai_utils.jev.tool_caller._types import JevParamsError, JevProposalChangedError

__all__ = ["build_graph"]

Graph = CompiledStateGraph[Any, Any, Any, Any]


# --- select_tool: Jev call 1 ------------------------------------------------------------------------------


def _tool_update(state: Mapping[str, Any], result: ClassifyResult[Any]) -> dict[str, Any]:
    answer = result.answers[core.TOOL_QUESTION]
    tool = {"name": answer.choice, "confidence": answer.confidence, "probabilities": dict(answer.probabilities)}
    return {"tool": tool, "usage": core.add_usage(state.get("usage"), result)}


def select_tool(state: ToolCallerState) -> dict[str, Any]:
    """Ask Jev which tool carries out the request."""
    run = current_run()
    questions = core.tool_question(list(run.tools.values()))
    return _tool_update(state, run.jev.classify(run.state_for(state), questions, timeout=run.timeout))


async def aselect_tool(state: ToolCallerState) -> dict[str, Any]:
    """Async `select_tool`."""
    run = current_run()
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
    run = current_run()
    name = _tool_name(state)
    return _after_resolve(state, run, name, resolve_sync(run, run.tool(name), state))


async def aresolve_params(state: ToolCallerState) -> Command[Any]:
    """Async `resolve_params`."""
    run = current_run()
    name = _tool_name(state)
    return _after_resolve(state, run, name, await resolve_async(run, run.tool(name), state))


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
    run = current_run()
    questions, ids, labels = _param_plan(state, run)
    result = run.jev.classify(run.state_for(state), questions, timeout=run.timeout)
    return _params_update(state, run, ids, labels, result)


async def aselect_params(state: ToolCallerState) -> dict[str, Any]:
    """Async `select_params`."""
    run = current_run()
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
    run = current_run()
    done, available = _gate(state, run)
    if done is not None:
        return done
    question = run.interrupt_on[state["tool"]["name"]]  # type: ignore[index]
    text = call_sync(question, available) if callable(question) else question
    return Command(goto="approval", update={"question": str(text)})


async def agate(state: ToolCallerState) -> Command[Any]:
    """Async `gate`."""
    run = current_run()
    done, available = _gate(state, run)
    if done is not None:
        return done
    question = run.interrupt_on[state["tool"]["name"]]  # type: ignore[index]
    text = await call_async(question, available) if callable(question) else question
    return Command(goto="approval", update={"question": str(text)})


# --- approval: the human in the loop ----------------------------------------------------------------------


def approval(state: ToolCallerState) -> Command[Any]:
    """Pause with the proposal (``interrupt``); resume with ``"approve"`` (execute) or ``"reject"`` (end)."""
    run = current_run()
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
    run = current_run()
    tool = run.tool(_tool_name(state))
    available = _arguments(state, run, tool.name, resolve_sync(run, tool, state))
    return _executed(state, run, tool.name, call_sync(tool.func, available))


async def aexecute(state: ToolCallerState) -> dict[str, Any]:
    """Async `execute`."""
    run = current_run()
    tool = run.tool(_tool_name(state))
    available = _arguments(state, run, tool.name, await resolve_async(run, tool, state))
    return _executed(state, run, tool.name, await call_async(tool.func, available))


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
