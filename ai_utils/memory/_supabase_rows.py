"""How checkpoints and pending writes become Supabase (PostgREST) rows, and rows become `CheckpointTuple` s.

Values are serialised with the saver's ``serde`` and stored base64-encoded; metadata is stored as JSON
(so ``list(filter=...)`` runs in the database), cleaned of what ``jsonb`` rejects.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

__all__ = [
    "CHECKPOINT_COLUMNS",
    "WRITE_COLUMNS",
    "Row",
    "checkpoint_row",
    "configurable",
    "json_safe",
    "pending_writes",
    "thread_config",
    "tuple_of",
    "write_rows",
]

Row = dict[str, Any]
CHECKPOINT_COLUMNS = (
    "thread_id,checkpoint_ns,checkpoint_id,parent_checkpoint_id,checkpoint_type,checkpoint_data,metadata"
)
WRITE_COLUMNS = "checkpoint_id,task_id,task_path,idx,channel,value_type,value_data"


def _encode(typed: tuple[str, bytes]) -> tuple[str, str]:
    return typed[0], base64.b64encode(typed[1]).decode("ascii")


def _decode(kind: str, data: str) -> tuple[str, bytes]:
    return kind, base64.b64decode(data)


def json_safe(value: Any) -> Any:
    """Metadata as JSON Postgres accepts (jsonb rejects NUL characters)."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {str(k).replace("\x00", ""): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return json.loads(json.dumps(value, default=str))


def _write_key(item: tuple[str, str, int, str, Any]) -> tuple[str, str, int]:
    return item[0], item[1], item[2]


def configurable(config: RunnableConfig) -> dict[str, Any]:
    """A copy of ``config["configurable"]`` (empty when missing)."""
    return dict(config.get("configurable") or {})


def thread_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config naming one checkpoint."""
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id}}


def checkpoint_row(
    serde: SerializerProtocol, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
) -> Row:
    """The checkpoint table row for ``checkpoint``, a child of the checkpoint ``config`` names."""
    conf = configurable(config)
    kind, data = _encode(serde.dumps_typed(checkpoint))
    return {
        "thread_id": str(conf["thread_id"]),
        "checkpoint_ns": conf.get("checkpoint_ns") or "",
        "checkpoint_id": checkpoint["id"],
        "parent_checkpoint_id": conf.get("checkpoint_id"),
        "checkpoint_type": kind,
        "checkpoint_data": data,
        "metadata": json_safe(get_serializable_checkpoint_metadata(config, metadata)),
    }


def write_rows(
    serde: SerializerProtocol, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
) -> list[Row]:
    """The writes table rows of one task's ``writes`` for the checkpoint ``config`` names."""
    conf = configurable(config)
    rows = []
    for index, (channel, value) in enumerate(writes):
        kind, data = _encode(serde.dumps_typed(value))
        rows.append(
            {
                "thread_id": str(conf["thread_id"]),
                "checkpoint_ns": conf.get("checkpoint_ns") or "",
                "checkpoint_id": conf["checkpoint_id"],
                "task_id": task_id,
                "task_path": task_path,
                "idx": WRITES_IDX_MAP.get(channel, index),
                "channel": channel,
                "value_type": kind,
                "value_data": data,
            }
        )
    return rows


def pending_writes(serde: SerializerProtocol, rows: Iterable[Row]) -> dict[str, list[PendingWrite]]:
    """Write rows grouped by checkpoint id, each group in the order LangGraph replays a step's writes."""
    result: dict[str, list[tuple[str, str, int, str, Any]]] = {}
    for row in rows:
        value = serde.loads_typed(_decode(row["value_type"], row["value_data"]))
        entry = (row["task_path"], row["task_id"], row["idx"], row["channel"], value)
        result.setdefault(row["checkpoint_id"], []).append(entry)
    # LangGraph replays a step's writes in writes_sort_key order: (task_path, task_id, idx).
    return {
        checkpoint_id: [(task_id, channel, value) for _p, task_id, _i, channel, value in sorted(items, key=_write_key)]
        for checkpoint_id, items in result.items()
    }


def tuple_of(serde: SerializerProtocol, row: Row, writes: dict[str, list[PendingWrite]]) -> CheckpointTuple:
    """The `CheckpointTuple` of a checkpoint row, with its pending writes from ``writes``."""
    thread_id, ns, checkpoint_id = row["thread_id"], row["checkpoint_ns"], row["checkpoint_id"]
    parent = row.get("parent_checkpoint_id")
    return CheckpointTuple(
        config=thread_config(thread_id, ns, checkpoint_id),
        checkpoint=serde.loads_typed(_decode(row["checkpoint_type"], row["checkpoint_data"])),
        metadata=cast("CheckpointMetadata", row.get("metadata") or {}),
        parent_config=thread_config(thread_id, ns, parent) if parent else None,
        pending_writes=writes.get(checkpoint_id, []),
    )
