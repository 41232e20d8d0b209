"""Build the compaction checkpoint: one rolling-summary SystemMessage plus the verbatim tail.

Pure functions shared by the sync and async paths of `SmartCheckpointSaver`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, copy_checkpoint
from langgraph.checkpoint.base.id import uuid6

from ai_utils._compat.langgraph import DeltaSnapshot, messages_delta_reducer
from ai_utils.memory._tool_units import SUMMARY_ID_PREFIX, count_turn_messages, safe_cut, split_summary

__all__ = ["COMPACTION_KEY", "Plan", "build_compaction", "plan_compaction", "replay_messages", "summary_text"]

COMPACTION_KEY = "ai_utils_compaction"
"""Metadata key marking a checkpoint written by `SmartCheckpointSaver` (its parent holds the raw messages)."""

_HEADER = "Summary of the earlier conversation:\n"


@dataclass(frozen=True, slots=True)
class Plan:
    """What one compaction folds into the summary and what it keeps verbatim."""

    to_summarize: list[BaseMessage]
    tail: list[BaseMessage]
    previous_summary: str | None


def summary_text(message: SystemMessage) -> str:
    """The summary text of a rolling-summary message, without its header."""
    text = str(message.text)
    return text[len(_HEADER) :] if text.startswith(_HEADER) else text


def plan_compaction(messages: Sequence[BaseMessage], keep_last: int) -> Plan | None:
    """Split ``messages`` into the part to summarize and the tool-unit aligned tail (None: nothing to fold)."""
    summary, body = split_summary(messages)
    cut = safe_cut(body, keep_last)
    if cut == 0:
        return None
    previous = summary_text(summary) if summary is not None else None
    return Plan(to_summarize=body[:cut], tail=body[cut:], previous_summary=previous)


def _next_id(after: str, step: int) -> str:
    new_id = str(uuid6(clock_seq=step))
    while new_id <= after:  # same clock tick as the checkpoint it follows; ids must sort after it
        new_id = str(uuid6(clock_seq=step))
    return new_id


def build_compaction(
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    plan: Plan,
    text: str,
    *,
    key: str,
    delta: bool,
    next_version: Callable[[Any], Any],
) -> tuple[Checkpoint, CheckpointMetadata, ChannelVersions, list[BaseMessage]]:
    """The child checkpoint that replaces the thread's messages with ``[summary, *tail]``.

    For a delta channel the new list is stored as a ``_DeltaSnapshot`` (LangGraph reads a snapshot
    directly and stops its ancestor walk there); for a plain channel as the list itself. The version of
    the channel is bumped so every saver stores the new blob. Nodes trigger on ``branch:to:*``
    channels, so the bump starts no node.
    """
    kept = count_turn_messages(plan.tail)
    summary = SystemMessage(
        content=_HEADER + text.strip(),
        id=f"{SUMMARY_ID_PREFIX}_{uuid.uuid4().hex}",
        response_metadata={"kept": kept},
    )
    messages: list[BaseMessage] = [summary, *plan.tail]
    step = int(metadata.get("step", 0)) + 1
    new = copy_checkpoint(checkpoint)
    new["id"] = _next_id(checkpoint["id"], step)
    new["ts"] = datetime.now(UTC).isoformat()
    version = next_version(checkpoint["channel_versions"].get(key))
    new["channel_versions"][key] = version
    new["channel_values"][key] = DeltaSnapshot(messages) if delta else messages
    new["updated_channels"] = [key]
    new_metadata: dict[str, Any] = {
        **metadata,
        "source": "update",
        "step": step,
        COMPACTION_KEY: {"summarized": len(plan.to_summarize), "kept": len(plan.tail)},
    }
    counters = dict(new_metadata.pop("counters_since_delta_snapshot", None) or {})
    counters.pop(key, None)
    if counters:
        new_metadata["counters_since_delta_snapshot"] = counters
    return new, new_metadata, {key: version}, messages  # type: ignore[return-value]


def replay_messages(seed: Any, writes: Sequence[tuple[str, str, Any]]) -> list[BaseMessage]:
    """Rebuild a delta channel's messages from a snapshot seed and ancestor writes, as LangGraph does."""
    reducer: Any = messages_delta_reducer
    channel: DeltaChannel[Any] = DeltaChannel(reducer)
    restored = channel.from_checkpoint(seed)
    restored.replay_writes(list(writes))
    return list(restored.get())
