"""`SmartCheckpointSaver`: any LangGraph checkpoint saver, kept within a token budget by a rolling summary.

How it works: every checkpoint goes to the ``inner`` saver unchanged. When a graph finishes a turn
(a ``"loop"`` checkpoint with no node left to run and every tool call answered) and a trigger fires,
the saver writes ONE extra child checkpoint (``source="update"``) whose ``messages`` are
``[SystemMessage(rolling summary), *verbatim tail]``. The next turn loads that checkpoint, so the model
sees the compacted history; the raw history stays in the parent chain (`get_raw_history`).

Both message channel kinds work: a plain ``add_messages`` channel (``create_agent``'s default state)
gets the new list, a LangGraph ``DeltaChannel`` (deepagents) gets it as a ``_DeltaSnapshot`` blob,
which LangGraph reads directly and where its ancestor walk stops.
"""

from __future__ import annotations

import builtins
import copy
import logging
import threading
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ai_utils._compat.langgraph import TASKS_CHANNEL, DeltaSnapshot
from ai_utils.exceptions import UserError
from ai_utils.memory._messages import achat_summarizer, chat_summarizer
from ai_utils.memory._summary import COMPACTION_KEY, Plan, build_compaction, plan_compaction, replay_messages
from ai_utils.memory._tool_units import Tally, dangling_calls, split_summary, tally_write

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["SmartCheckpointSaver"]

logger = logging.getLogger("ai_utils.memory")

_Messages: TypeAlias = list[BaseMessage]

_KEY = "messages"
_MAX_THREADS = 10_000
# Optional saver methods: a wrapper over a saver without them must not claim them (conformance detects
# capabilities by override), so those stay BaseCheckpointSaver's.
_OPTIONAL = ("delete_for_runs", "adelete_for_runs", "copy_thread", "acopy_thread", "prune", "aprune")
_VARIANTS: dict[frozenset[str], type[SmartCheckpointSaver]] = {}
# A failing summarizer fails on every turn; the first failure in the process is a WARNING, the rest DEBUG.
_FAILED_BEFORE = threading.Event()


def _default_llm_problem() -> str | None:
    """Why ``get_llm()`` would fail right now (e.g. the missing key variable), or ``None``.

    The default model is still created lazily on the first summary (the environment may change until then);
    this only tries it once so a saver that can never summarize says so at construction.
    """
    from ai_utils.llm import get_llm

    try:
        get_llm()
    except UserError as error:
        return str(error)
    return None


@dataclass(slots=True)
class _Thread:
    """What the saver knows about one thread between checkpoints (root namespace only)."""

    head: str | None = None
    tally: Tally = field(default_factory=Tally)
    pending: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Due:
    """A finished turn whose counters say (or cannot rule out) that it needs a summary."""

    thread: _Thread
    delta: bool
    messages: list[BaseMessage] | None


class _Shared:
    """State shared by a saver and its `with_allowlist` clones: the lazy llm and the per-thread counters."""

    def __init__(self, llm: BaseChatModel | None) -> None:
        self.llm = llm
        self.threads: dict[str, _Thread] = {}
        self.lock = threading.Lock()

    def thread(self, thread_id: str) -> _Thread:
        memo = self.threads.get(thread_id)  # the hot path: one dict read, no lock
        if memo is None:
            with self.lock:
                memo = self.threads.get(thread_id)
                if memo is None:
                    memo = self.threads[thread_id] = _Thread(tally=Tally(exact=False))
                    if len(self.threads) > _MAX_THREADS:
                        del self.threads[next(iter(self.threads))]  # the thread seen first
        return memo

    def forget(self, thread_id: str) -> None:
        with self.lock:
            self.threads.pop(thread_id, None)


def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UserError(f"{name} must be an int >= {minimum}, got {value!r}. Pass e.g. {name}={max(minimum, 4)}.")
    return value


def _finished_turn(checkpoint: Checkpoint, metadata: CheckpointMetadata) -> bool:
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
    return _KEY in checkpoint["channel_versions"]


class SmartCheckpointSaver(BaseCheckpointSaver[Any]):
    """A checkpoint saver that keeps each thread's messages within a token budget with a rolling summary.

    Wraps any LangGraph saver (``inner``) and delegates every method to it, sync and async. At the end of
    a finished turn (never inside a tool loop, never while an interrupt waits) it compacts the thread when
    the approximate tokens of all messages (tool calls and results included) exceed ``max_tokens`` or
    ``messages_before_summary`` user/AI messages arrived since the last summary:

    - ONE rolling summary as a SystemMessage replaces the previous summary and the older messages;
    - the last ``keep_last_messages`` user/AI messages stay verbatim, the cut aligned to tool units (an
      AIMessage with tool calls and all its ToolMessages are never split, also when several AI messages'
      tool results are adjacent), so the model never gets an orphaned ToolMessage;
    - tool results are cut to ``max_tool_result_chars`` in the summarizer's input;
    - fail-open: if the summarizer raises, the checkpoint stays as it was and the error is logged;
    - the raw messages stay in the inner saver's checkpoint chain: `get_raw_history` returns them.

    Works for ``create_agent`` threads (plain ``add_messages`` channel) and delta-channel threads
    (deepagents, ``DeltaChannel(_messages_delta_reducer)``). Tokens are counted incrementally from the
    writes LangGraph stores, so a checkpoint under budget costs almost nothing extra.

    Example:
        ```python
        from langchain.agents import create_agent
        from langgraph.checkpoint.memory import InMemorySaver

        from ai_utils.memory import SmartCheckpointSaver

        saver = SmartCheckpointSaver(InMemorySaver(), max_tokens=24_000, keep_last_messages=4)
        agent = create_agent(model, tools, checkpointer=saver)
        agent.invoke({"messages": [("user", "Ich heisse Max.")]}, {"configurable": {"thread_id": "u1"}})
        ```

    Args:
        inner: the saver that stores the checkpoints.
        llm: the summarizer chat model; default `ai_utils.get_llm()`, created at the first summary.
        max_tokens: approximate token budget over all messages (characters / 4).
        messages_before_summary: user/AI messages since the last summary that trigger a summary.
        keep_last_messages: user/AI messages kept verbatim (tool results travel with their AI message).
        max_summary_words: the most words the summary may have.
        max_tool_result_chars: tool results are cut to this length in the summarizer's input.
        debug: log token counts, triggers and summaries (INFO on logger ``"ai_utils.memory"``).

    Raises:
        UserError: ``inner`` is not a checkpoint saver or a number is out of range.
    """

    def __new__(cls, inner: Any = None, *args: Any, **kwargs: Any) -> SmartCheckpointSaver:  # noqa: D102
        if inner is None or cls is not SmartCheckpointSaver:  # copy.copy() passes no arguments
            return super().__new__(cls)
        missing = frozenset(
            name for name in _OPTIONAL if getattr(type(inner), name, None) is getattr(BaseCheckpointSaver, name)
        )
        if not missing:
            return super().__new__(cls)
        variant = _VARIANTS.get(missing)
        if variant is None:
            body = {name: getattr(BaseCheckpointSaver, name) for name in missing}
            variant = _VARIANTS.setdefault(missing, type(cls.__name__, (cls,), {**body, "__module__": cls.__module__}))
        return super().__new__(variant)

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        *,
        llm: BaseChatModel | None = None,
        max_tokens: int = 24_000,
        messages_before_summary: int = 12,
        keep_last_messages: int = 4,
        max_summary_words: int = 300,
        max_tool_result_chars: int = 3_000,
        debug: bool = False,
    ) -> None:
        if not isinstance(inner, BaseCheckpointSaver):
            raise UserError(
                f"inner must be a LangGraph checkpoint saver, got {type(inner).__name__}. "
                "Pass e.g. SmartCheckpointSaver(MemorySaver())."
            )
        self._inner = inner
        self.max_tokens = _check_int(max_tokens, "max_tokens", 1)
        self.keep_last_messages = _check_int(keep_last_messages, "keep_last_messages", 1)
        self.messages_before_summary = _check_int(messages_before_summary, "messages_before_summary", 1)
        if self.messages_before_summary <= self.keep_last_messages:
            raise UserError(
                f"messages_before_summary ({messages_before_summary!r}) must be greater than keep_last_messages "
                f"({keep_last_messages!r}), or every turn would be summarized. Raise messages_before_summary."
            )
        self.max_summary_words = _check_int(max_summary_words, "max_summary_words", 1)
        self.max_tool_result_chars = _check_int(max_tool_result_chars, "max_tool_result_chars", 1)
        self.debug = debug
        self._shared = _Shared(llm)
        if llm is None and (problem := _default_llm_problem()) is not None:
            # A log record, not warnings.warn: savers are built at import time of apps and test modules alike.
            logger.warning(
                "SmartCheckpointSaver has no `llm` and the default model cannot be created, so threads will "
                "never be summarized: %s Pass `llm=get_llm(...)` or set the variable.",
                problem,
            )

    def __repr__(self) -> str:
        return (
            f"SmartCheckpointSaver({self._inner!r}, max_tokens={self.max_tokens}, "
            f"messages_before_summary={self.messages_before_summary}, keep_last_messages={self.keep_last_messages})"
        )

    @property
    def inner(self) -> BaseCheckpointSaver[Any]:
        """The wrapped saver (e.g. to call its ``setup()``)."""
        return self._inner

    @property
    def serde(self) -> SerializerProtocol:
        """The inner saver's serializer."""
        return self._inner.serde

    @serde.setter
    def serde(self, value: SerializerProtocol) -> None:
        self._inner.serde = value

    @property
    def config_specs(self) -> builtins.list[Any]:
        """The inner saver's configuration specs."""
        return self._inner.config_specs

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> SmartCheckpointSaver:
        """A clone over ``inner.with_allowlist(...)`` that shares the llm and the thread counters."""
        inner = self._inner.with_allowlist(extra_allowlist)
        if inner is self._inner:
            return self
        clone = copy.copy(self)
        clone._inner = inner
        return clone

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The inner saver's next channel version."""
        return self._inner.get_next_version(current, channel)

    # ----------------------------------------------------------------------------- reads (pure delegation)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Delegate to ``inner``."""
        return self._inner.get_tuple(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Delegate to ``inner``."""
        return await self._inner.aget_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Delegate to ``inner``."""
        return self._inner.list(config, filter=filter, before=before, limit=limit)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Delegate to ``inner``."""
        async for item in self._inner.alist(config, filter=filter, before=before, limit=limit):
            yield item

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Delegate to ``inner``."""
        return self._inner.get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Delegate to ``inner``."""
        return await self._inner.aget_delta_channel_history(config=config, channels=channels)

    # ----------------------------------------------------------------------------- deletes (delegation)

    def delete_thread(self, thread_id: str) -> None:
        """Delegate to ``inner`` and forget the thread's counters."""
        self._shared.forget(str(thread_id))
        self._inner.delete_thread(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delegate to ``inner`` and forget the thread's counters."""
        self._shared.forget(str(thread_id))
        await self._inner.adelete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delegate to ``inner``."""
        self._inner.delete_for_runs(run_ids)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delegate to ``inner``."""
        await self._inner.adelete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Delegate to ``inner``."""
        self._inner.copy_thread(source_thread_id, target_thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Delegate to ``inner``."""
        await self._inner.acopy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Delegate to ``inner``."""
        self._inner.prune(thread_ids, strategy=strategy)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Delegate to ``inner``."""
        await self._inner.aprune(thread_ids, strategy=strategy)

    # ----------------------------------------------------------------------------- writes

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Delegate to ``inner`` and note the thread's new messages for the token count."""
        self._inner.put_writes(config, writes, task_id, task_path)
        self._note_writes(config, writes, task_id)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Delegate to ``inner`` and note the thread's new messages for the token count."""
        await self._inner.aput_writes(config, writes, task_id, task_path)
        self._note_writes(config, writes, task_id)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store the checkpoint in ``inner``; at the end of a turn over a trigger, add the compacted child.

        Returns:
            The config of the compacted child when one was written, else ``inner``'s config.
        """
        stored = self._inner.put(config, checkpoint, metadata, new_versions)
        due = self._advance(config, checkpoint, metadata)
        if due is None:
            return stored
        messages = due.messages
        if messages is None:
            history = self._inner.get_delta_channel_history(config=stored, channels=[_KEY])
            messages = replay_messages(history[_KEY].get("seed"), history[_KEY]["writes"])
        plan = self._plan(due, messages)
        if plan is None:
            return stored
        try:
            text = chat_summarizer(plan.to_summarize, llm=self._llm(), **self._summary_args(plan))
            built = self._build(due, checkpoint, metadata, plan, text)
            new_config = self._inner.put(stored, built[0], built[1], built[2])
        except Exception as error:
            self._log_failure(error)
            return stored
        self._committed(due, built[0]["id"], built[3], text)
        return new_config

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of `put`."""
        stored = await self._inner.aput(config, checkpoint, metadata, new_versions)
        due = self._advance(config, checkpoint, metadata)
        if due is None:
            return stored
        messages = due.messages
        if messages is None:
            history = await self._inner.aget_delta_channel_history(config=stored, channels=[_KEY])
            messages = replay_messages(history[_KEY].get("seed"), history[_KEY]["writes"])
        plan = self._plan(due, messages)
        if plan is None:
            return stored
        try:
            text = await achat_summarizer(plan.to_summarize, llm=self._llm(), **self._summary_args(plan))
            built = self._build(due, checkpoint, metadata, plan, text)
            new_config = await self._inner.aput(stored, built[0], built[1], built[2])
        except Exception as error:
            self._log_failure(error)
            return stored
        self._committed(due, built[0]["id"], built[3], text)
        return new_config

    # ----------------------------------------------------------------------------- raw history

    def get_raw_history(self, config: RunnableConfig) -> _Messages:
        """Every message of the thread as it was before any summary, oldest first (summaries left out).

        Walks the inner saver's checkpoint chain from ``config`` (the latest checkpoint when it names
        none); each compaction checkpoint's parent holds the messages it folded away.

        Args:
            config: ``{"configurable": {"thread_id": ...}}``, optionally with a ``checkpoint_id``.

        Returns:
            The raw messages; ``[]`` for an unknown thread.
        """
        segments: builtins.list[_Messages] = []
        current = self._inner.get_tuple(config)
        head = self._messages_of(current) if current is not None else []
        while current is not None:
            parent = self._inner.get_tuple(current.parent_config) if current.parent_config else None
            if COMPACTION_KEY in current.metadata and parent is not None:
                kept = {m.id for m in self._messages_of(current)}
                segments.append([m for m in split_summary(self._messages_of(parent))[1] if m.id not in kept])
            current = parent
        return [m for segment in reversed(segments) for m in segment] + split_summary(head)[1]

    async def aget_raw_history(self, config: RunnableConfig) -> _Messages:
        """Async twin of `get_raw_history`."""
        segments: builtins.list[_Messages] = []
        current = await self._inner.aget_tuple(config)
        head = await self._amessages_of(current) if current is not None else []
        while current is not None:
            parent = await self._inner.aget_tuple(current.parent_config) if current.parent_config else None
            if COMPACTION_KEY in current.metadata and parent is not None:
                kept = {m.id for m in await self._amessages_of(current)}
                older = split_summary(await self._amessages_of(parent))[1]
                segments.append([m for m in older if m.id not in kept])
            current = parent
        return [m for segment in reversed(segments) for m in segment] + split_summary(head)[1]

    # ----------------------------------------------------------------------------- internals

    def _messages_of(self, tup: CheckpointTuple) -> _Messages:
        value = tup.checkpoint["channel_values"].get(_KEY)
        if value is not None and not isinstance(value, DeltaSnapshot):
            return list(value)
        if value is None and _KEY not in tup.checkpoint["channel_versions"]:
            return []
        if value is not None:
            return replay_messages(value, [])
        history = self._inner.get_delta_channel_history(config=tup.config, channels=[_KEY])
        return replay_messages(history[_KEY].get("seed"), history[_KEY]["writes"])

    async def _amessages_of(self, tup: CheckpointTuple) -> _Messages:
        value = tup.checkpoint["channel_values"].get(_KEY)
        if value is not None and not isinstance(value, DeltaSnapshot):
            return list(value)
        if value is None and _KEY not in tup.checkpoint["channel_versions"]:
            return []
        if value is not None:
            return replay_messages(value, [])
        history = await self._inner.aget_delta_channel_history(config=tup.config, channels=[_KEY])
        return replay_messages(history[_KEY].get("seed"), history[_KEY]["writes"])

    def _note_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str) -> None:
        values = [value for channel, value in writes if channel == _KEY]
        if not values:
            return
        conf = config.get("configurable", {})
        if conf.get("checkpoint_ns") or "checkpoint_id" not in conf:
            return
        memo = self._shared.thread(str(conf["thread_id"]))
        memo.pending.setdefault(str(conf["checkpoint_id"]), {})[task_id] = values

    def _advance(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata) -> _Due | None:
        """Move the thread's counters to ``checkpoint``; return a `_Due` when a finished turn may need a summary."""
        conf = config.get("configurable", {})
        if conf.get("checkpoint_ns") or "thread_id" not in conf:
            return None
        memo = self._shared.thread(str(conf["thread_id"]))
        parent = conf.get("checkpoint_id")
        if checkpoint["id"] == memo.head:  # the same checkpoint stored again: nothing new to count
            pass
        elif parent is None and memo.head is None:
            memo.tally = Tally()
        elif parent is None or parent != memo.head:
            memo.tally.exact = False
        else:
            for task_writes in memo.pending.pop(parent, {}).values():
                for value in task_writes:
                    tally_write(memo.tally, value)
        memo.head = checkpoint["id"]
        if memo.pending:
            for stale in [cid for cid in memo.pending if cid < memo.head]:
                del memo.pending[stale]
        if not _finished_turn(checkpoint, metadata):
            return None
        tally = memo.tally
        value = checkpoint["channel_values"].get(_KEY)
        known = value.value if isinstance(value, DeltaSnapshot) else value
        if isinstance(known, list) and len(known) != tally.count:  # writes we never saw (durability="exit")
            tally.exact = False
        if tally.exact and tally.tokens <= self.max_tokens and tally.since_summary < self.messages_before_summary:
            if self.debug:
                logger.info("thread %s: ~%d tokens, %d new messages: under budget", conf["thread_id"], *_counts(tally))
            return None
        if value is None or isinstance(value, DeltaSnapshot):
            return _Due(memo, True, list(value.value) if value is not None else None)
        return _Due(memo, False, list(value))

    def _plan(self, due: _Due, messages: _Messages) -> Plan | None:
        tally = due.thread.tally = Tally.of(messages, due.thread.sizes)
        over_tokens = tally.tokens > self.max_tokens
        over_count = tally.since_summary >= self.messages_before_summary
        if self.debug:
            logger.info(
                "~%d tokens (max %d), %d new messages (max %d): %s",
                tally.tokens,
                self.max_tokens,
                tally.since_summary,
                self.messages_before_summary,
                "summarizing" if over_tokens or over_count else "under budget",
            )
        if not (over_tokens or over_count) or dangling_calls(messages):
            return None
        return plan_compaction(messages, self.keep_last_messages)

    def _summary_args(self, plan: Plan) -> dict[str, Any]:
        return {
            "previous_summary": plan.previous_summary,
            "max_words": self.max_summary_words,
            "max_tool_result_chars": self.max_tool_result_chars,
        }

    def _llm(self) -> BaseChatModel:
        if self._shared.llm is None:
            from ai_utils.llm import get_llm

            self._shared.llm = get_llm()
        return self._shared.llm

    def _build(
        self, due: _Due, checkpoint: Checkpoint, metadata: CheckpointMetadata, plan: Plan, text: str
    ) -> tuple[Checkpoint, CheckpointMetadata, ChannelVersions, _Messages]:
        return build_compaction(
            checkpoint,
            metadata,
            plan,
            text,
            key=_KEY,
            delta=due.delta,
            next_version=lambda current: self._inner.get_next_version(current, None),
        )

    def _committed(self, due: _Due, checkpoint_id: str, messages: _Messages, text: str) -> None:
        due.thread.head = checkpoint_id
        due.thread.tally = Tally.of(messages, due.thread.sizes)
        if due.thread.tally.tokens > self.max_tokens:
            logger.warning(
                "SmartCheckpointSaver: the summary and the last %d messages alone take ~%d tokens, more than "
                "max_tokens=%d, so every turn will be summarized. Raise max_tokens or lower keep_last_messages.",
                self.keep_last_messages,
                due.thread.tally.tokens,
                self.max_tokens,
            )
        if self.debug:
            logger.info("summarized; now ~%d tokens; summary: %s", due.thread.tally.tokens, text)

    def _log_failure(self, error: Exception) -> None:
        first = not _FAILED_BEFORE.is_set()
        _FAILED_BEFORE.set()
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "SmartCheckpointSaver: summarizing failed (%s: %s); the checkpoint was stored unchanged.%s",
            type(error).__name__,
            error,
            " Later failures in this process are logged at DEBUG." if first else "",
        )


def _counts(tally: Tally) -> tuple[int, int]:
    return tally.tokens, tally.since_summary
