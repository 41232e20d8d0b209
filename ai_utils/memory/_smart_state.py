"""What `SmartCheckpointSaver` knows about each thread between checkpoints, and when a turn has finished.

The counters are per process and per saver (shared with its `with_allowlist` clones); they only decide
*when* to look at a thread's messages, never what is stored, so losing them (a restart, a thread evicted
after `MAX_THREADS`) costs one exact recount at the next finished turn.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata

from ai_utils._compat.langgraph import TASKS_CHANNEL
from ai_utils.memory._tool_units import Tally

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["KEY", "MAX_THREADS", "Due", "Shared", "ThreadMemo", "finished_turn"]

KEY = "messages"
MAX_THREADS = 10_000


@dataclass(slots=True)
class ThreadMemo:
    """What the saver knows about one thread between checkpoints (root namespace only)."""

    head: str | None = None
    tally: Tally = field(default_factory=Tally)
    pending: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Due:
    """A finished turn whose counters say (or cannot rule out) that it needs a summary."""

    thread: ThreadMemo
    delta: bool
    messages: list[BaseMessage] | None


class Shared:
    """State shared by a saver and its `with_allowlist` clones: the lazy llm and the per-thread counters."""

    def __init__(self, llm: BaseChatModel | None) -> None:
        self.llm = llm
        self.threads: dict[str, ThreadMemo] = {}
        self.lock = threading.Lock()

    def thread(self, thread_id: str) -> ThreadMemo:
        """The thread's memo, created (inexact: history unseen) on first use; the oldest is evicted past the cap."""
        memo = self.threads.get(thread_id)  # the hot path: one dict read, no lock
        if memo is None:
            with self.lock:
                memo = self.threads.get(thread_id)
                if memo is None:
                    memo = self.threads[thread_id] = ThreadMemo(tally=Tally(exact=False))
                    if len(self.threads) > MAX_THREADS:
                        del self.threads[next(iter(self.threads))]  # the thread seen first
        return memo

    def forget(self, thread_id: str) -> None:
        """Drop the thread's memo (its checkpoints were deleted)."""
        with self.lock:
            self.threads.pop(thread_id, None)


def finished_turn(checkpoint: Checkpoint, metadata: CheckpointMetadata) -> bool:
    """A ``"loop"`` checkpoint with no node left to run: the graph finished a turn."""
    # A node is still due exactly when a `branch:to:<node>` channel holds a value or a Send is queued.
    # Plain loops: this runs on every put, and generator expressions cost more than the check itself.
    if metadata.get("source") != "loop":
        return False
    values = checkpoint["channel_values"]
    if values.get(TASKS_CHANNEL):
        return False
    for name in values:
        if name.startswith("branch:to:"):
            return False
    return KEY in checkpoint["channel_versions"]
