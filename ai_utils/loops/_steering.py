"""Steering a running loop: queued steers join the running agent step before its next model call.

The agent steps' repair step (`ThreadRepair`, a ``before_model`` node every step graph has anyway) also reads the
run's steering queue in the run store: steers queued after the last one this run took join the step as user
messages (``response_metadata`` carries their sequence number, so the chunk adapter shows them as
``user_message`` chunks and the cursor survives a resume). The run and the cursor it starts from come in the
step's config (`STEER_CONFIG`), set by the step's node from the loop state; the node reads the cursor back from
the step's messages when the step ends. Follow-ups wait for the run's last boundary (`LoopRunStore.seal`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import AgentState
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from ai_utils._run.repair import ThreadRepair, repair_messages
from ai_utils.loops._store import LoopRunStore
from ai_utils.streaming._adapter import STEER_KEY

__all__ = ["STEER_CONFIG", "STEER_SEQ", "LoopStepRepair", "steer_cursor", "steer_message"]

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


class LoopStepRepair(ThreadRepair):
    """An agent step's repair step that also lets the run's queued steers join before each model call."""

    def __init__(self, store: LoopRunStore) -> None:
        super().__init__()
        self.store = store

    def _joined(self, messages: Sequence[AnyMessage]) -> list[HumanMessage]:
        steering = get_config().get("configurable", {}).get(STEER_CONFIG)
        if not steering:
            return []
        run_id, after = steering
        rows = self.store.messages(run_id, after=steer_cursor(messages, after))
        return [steer_message(run_id, seq, text) for seq, text in rows]

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Answer unanswered tool calls, then add the steers queued since the last model call."""
        messages = state["messages"]
        update = repair_messages(messages)
        joined = self._joined(messages)
        if not joined:
            return None if update is None else {"messages": update}
        return {"messages": [*(update or ()), *joined]}
