"""Steering a running loop: queued steers join the running agent step before its next model call.

An agent step's model-call hook (`LoopSteering`) reads the run's steering queue in the run store: steers queued
after the last one this run took join the step as user messages (``response_metadata`` carries their sequence
number, so the chunk adapter shows them as ``user_message`` chunks and the cursor survives a resume); the step's
repair hook stores them with the model's answer. The run and the cursor it starts from come in the step's config
(`STEER_CONFIG`), set by the step's node from the loop state; the node reads the cursor back from the step's
messages when the step ends. Follow-ups wait for the run's last boundary (`LoopRunStore.seal`).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
from langgraph.config import get_config

from ai_utils._run.hooks import awaited
from ai_utils._run.repair import CallStep, ModelCallRepair, akeeping_steers, keeping_steers
from ai_utils.loops._store import LoopRunStore
from ai_utils.streaming._adapter import STEER_KEY

__all__ = ["STEER_CONFIG", "STEER_SEQ", "LoopSteering", "LoopStepRepair", "steer_cursor", "steer_message"]

STEER_CONFIG = "ai_utils_loop_steering"
"""``config["configurable"]`` key of an agent step: ``(run_id, steers taken before the step)``."""
STEER_SEQ = "ai_utils_loop_steer"
"""``HumanMessage.response_metadata`` key: the queue sequence number of a steer that joined a step."""
_NAMESPACE = uuid.UUID("7d0f1d5e-8a4b-4c55-9d0e-5b1f3c1a2e77")


def steer_cursor(messages: Sequence[BaseMessage], after: int) -> int:
    """The highest steer sequence number among ``messages`` (at least ``after``)."""
    for message in messages:
        seq = message.response_metadata.get(STEER_SEQ) if isinstance(message, HumanMessage) else None
        if isinstance(seq, int) and seq > after:
            after = seq
    return after


def steer_message(run_id: str, seq: int, text: str) -> HumanMessage:
    """A queued steer (or follow-up) as the user message a step sees (a stable id: a resume adds it once)."""
    return HumanMessage(
        text,
        id=uuid.uuid5(_NAMESPACE, f"{run_id}/{seq}").hex,
        response_metadata={STEER_KEY: str(seq), STEER_SEQ: seq},
    )


class LoopSteering(AgentMiddleware[AgentState[Any], Any, Any]):
    """An agent step's steering: the run's queued steers join before each model call (a model-call hook).

    No graph node of its own (a ``before_model`` node costs a LangGraph superstep and a checkpoint write per model
    call): the steers are appended to the request, so every hook inside sees them (the user's, e.g. guardrails),
    and the step's repair hook (`ai_utils._run.repair.ModelCallRepair`, innermost) stores them with the model's
    answer, as the model got them — the way `Agent` joins a durable session's steers.
    """

    def __init__(self, store: LoopRunStore) -> None:
        super().__init__()
        self.store = store

    @property
    def name(self) -> str:
        """Middleware name (unique per step graph)."""
        return "ai_utils.LoopSteering"

    def joining(self, request: ModelRequest) -> tuple[ModelRequest, list[HumanMessage]]:
        steering = get_config().get("configurable", {}).get(STEER_CONFIG)
        if not steering:
            return request, []
        run_id, after = steering
        state = request.state
        stored = state.get("messages", request.messages) if isinstance(state, dict) else request.messages
        rows = self.store.messages(run_id, after=steer_cursor(stored, after))
        if not rows:
            return request, []
        held = {m.id for m in request.messages}
        joined = [m for m in (steer_message(run_id, seq, text) for seq, text in rows) if m.id not in held]
        if not joined:
            return request, []
        return request.override(messages=[*request.messages, *joined]), joined

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        """Join the queued steers, then call the model."""
        request, joined = self.joining(request)
        return keeping_steers(request, handler, joined) if joined else handler(request)

    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Coroutine[Any, Any, Any]:
        """Async twin of `wrap_model_call` (a plain method: see `ai_utils._run.hooks`)."""
        request, joined = self.joining(request)
        if not joined:
            return awaited(handler(request))
        return akeeping_steers(request, handler, joined)


class LoopStepRepair(ModelCallRepair):
    """An agent step's repair hook; with ``steering``, the run's steers join on it (no hook of their own).

    Used when no middleware sits between the two hooks (a hook costs every model call): the steers then reach
    exactly the same hooks, and the repair stores them with the model's answer.
    """

    def __init__(self, steering: LoopSteering | None, *steps: CallStep | None) -> None:
        super().__init__(*steps)
        self.steering = steering

    def _prepare(self, request: ModelRequest) -> tuple[ModelRequest, list[AnyMessage] | None, list[Any]]:
        if self.steering is not None:
            request = self.steering.joining(request)[0]
        return super()._prepare(request)
