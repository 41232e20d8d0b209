"""`JevToolCaller`'s outputs from one graph run: interrupt, gated, rejected or return (with debug metadata)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph.types import GraphOutput

from ai_utils.jev.tool_caller import _core as core
from ai_utils.jev.tool_caller._runtime import RunContext
from ai_utils.jev.tool_caller._types import (
    JevBelow,
    JevGated,
    JevInterrupt,
    JevMetadata,
    JevOutput,
    JevParamChoice,
    JevReturn,
    JevToolChoice,
)

__all__ = ["debug_metadata", "params_out", "result"]


def params_out(state: Mapping[str, Any], objects: Mapping[str, Any]) -> dict[str, JevParamChoice]:
    """The output params: original objects where this run has them, else their JSON."""
    return {
        name: JevParamChoice(
            value=objects[name] if name in objects else picked["value"], confidence=picked["confidence"]
        )
        for name, picked in (state.get("params") or {}).items()
    }


def result(output: GraphOutput[Any], run: RunContext, debug: bool) -> JevOutput:
    """The `JevOutput` of one graph run: interrupt, gated, rejected or return."""
    state: Mapping[str, Any] = output.value
    tool_state = state.get("tool") or {}
    tool = JevToolChoice(name=tool_state.get("name", ""), confidence=tool_state.get("confidence", 0.0))
    if run.arguments is not None:
        objects: Mapping[str, Any] = run.arguments
    elif run.candidates is not None:
        objects = {n: run.candidates[n][p["index"]] for n, p in (state.get("params") or {}).items()}
    else:
        objects = {}  # rejected after a resume: the candidates were not resolved again
    params = params_out(state, objects)
    metadata = debug_metadata(state, run) if debug else None
    if output.interrupts:
        question = str(output.interrupts[0].value.get("question", ""))
        return JevInterrupt(question=question, tool=tool, params=params, metadata=metadata)
    outcome = state.get("outcome")
    if outcome == "gated":
        below = [JevBelow(**item) for item in state.get("below") or []]
        return JevGated(tool=tool, params=params, below=below, metadata=metadata)
    if outcome == "rejected":
        return JevReturn(value=None, tool=tool, params=params, rejected=True, metadata=metadata)
    return JevReturn(value=run.value, tool=tool, params=params, metadata=metadata)


def debug_metadata(state: Mapping[str, Any], run: RunContext) -> JevMetadata:
    """The ``debug=True`` metadata; built from state and the run, never from ``context``."""
    params = state.get("params") or {}
    usage = state.get("usage") or {"input_tokens": 0, "output_tokens": 0, "cost": None, "calls": 0}
    return JevMetadata(
        selected_tool=state.get("tool"),
        selected_params={name: dict(picked) for name, picked in params.items()},
        arguments={name: picked["value"] for name, picked in params.items()},
        usage=dict(usage),
        state=run.seen_state or core.jev_state(run.prompt, state.get("message_history") or [], None),
    )
