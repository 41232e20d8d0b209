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
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from ai_utils._compat.langgraph import DeltaSnapshot
from ai_utils.exceptions import UserError
from ai_utils.memory._error_writes import without_error_text
from ai_utils.memory._messages import achat_summarizer, chat_summarizer
from ai_utils.memory._methods import Flow, Step, twins
from ai_utils.memory._smart_state import KEY as _KEY
from ai_utils.memory._smart_state import Due, Shared, finished_turn
from ai_utils.memory._summary import COMPACTION_KEY, Plan, build_compaction, plan_compaction, replay_messages
from ai_utils.memory._tool_units import Tally, dangling_calls, split_summary, tally_write
from ai_utils.memory._wrapper import SaverWrapper

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["SmartCheckpointSaver"]

logger = logging.getLogger("ai_utils.memory")

_Messages: TypeAlias = list[BaseMessage]

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


def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UserError(f"{name} must be an int >= {minimum}, got {value!r}. Pass e.g. {name}={max(minimum, 4)}.")
    return value


class SmartCheckpointSaver(SaverWrapper):
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

    _variants: ClassVar[dict[frozenset[str], type[Any]] | None] = {}

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
        self._shared = Shared(llm)
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

    # ----------------------------------------------------------------------------- writes

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Flow[RunnableConfig]:
        """Store the checkpoint in ``inner``; at the end of a turn over a trigger, add the compacted child.

        Returns:
            The config of the compacted child when one was written, else ``inner``'s config.
        """
        stored: RunnableConfig = yield Step.of(self._inner, "put", config, checkpoint, metadata, new_versions)
        due = self._advance(config, checkpoint, metadata)
        if due is None:
            return stored
        messages = due.messages
        if messages is None:
            messages = yield from self._history(stored)
        plan = self._plan(due, messages)
        if plan is None:
            return stored
        try:
            summary_args = {"llm": self._llm(), **self._summary_args(plan)}
            text: str = yield Step(chat_summarizer, achat_summarizer, (plan.to_summarize,), summary_args)
            built = self._build(due, checkpoint, metadata, plan, text)
            new_config: RunnableConfig = yield Step.of(self._inner, "put", stored, built[0], built[1], built[2])
        except Exception as error:
            self._log_failure(error)
            return stored
        self._committed(due, built[0]["id"], built[3], text)
        return new_config

    put, aput = twins(_put, "put")

    def _put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> Flow[None]:
        """Delegate to ``inner`` and note the thread's new messages for the token count.

        A failed task's exception reaches ``inner`` as its class name only (`without_error_text`), whatever saver
        ``inner`` is.
        """
        writes = without_error_text(writes)
        yield Step.of(self._inner, "put_writes", config, writes, task_id, task_path)
        self._note_writes(config, writes, task_id)

    put_writes, aput_writes = twins(_put_writes, "put_writes", _put_writes.__doc__)

    def _delete_thread(self, thread_id: str) -> Flow[None]:
        """Delegate to ``inner`` and forget the thread's counters."""
        self._shared.forget(str(thread_id))
        yield Step.of(self._inner, "delete_thread", thread_id)

    delete_thread, adelete_thread = twins(_delete_thread, "delete_thread", _delete_thread.__doc__)

    # ----------------------------------------------------------------------------- raw history

    def _raw_history(self, config: RunnableConfig) -> Flow[_Messages]:
        """Every message of the thread as it was before any summary, oldest first (summaries left out).

        Walks the inner saver's checkpoint chain from ``config`` (the latest checkpoint when it names
        none); each compaction checkpoint's parent holds the messages it folded away.

        Args:
            config: ``{"configurable": {"thread_id": ...}}``, optionally with a ``checkpoint_id``.

        Returns:
            The raw messages; ``[]`` for an unknown thread.
        """
        segments: builtins.list[_Messages] = []
        current = yield Step.of(self._inner, "get_tuple", config)
        head = (yield from self._messages_of(current)) if current is not None else []
        while current is not None:
            parent = (yield Step.of(self._inner, "get_tuple", current.parent_config)) if current.parent_config else None
            if COMPACTION_KEY in current.metadata and parent is not None:
                kept = {m.id for m in (yield from self._messages_of(current))}
                older = split_summary((yield from self._messages_of(parent)))[1]
                segments.append([m for m in older if m.id not in kept])
            current = parent
        return [m for segment in reversed(segments) for m in segment] + split_summary(head)[1]

    get_raw_history, aget_raw_history = twins(_raw_history, "get_raw_history")

    # ----------------------------------------------------------------------------- internals

    def _messages_of(self, tup: CheckpointTuple) -> Flow[_Messages]:
        value = tup.checkpoint["channel_values"].get(_KEY)
        if value is not None and not isinstance(value, DeltaSnapshot):
            return list(value)
        if value is None and _KEY not in tup.checkpoint["channel_versions"]:
            return []
        if value is not None:
            return replay_messages(value, [])
        return (yield from self._history(tup.config))

    def _history(self, config: RunnableConfig) -> Flow[_Messages]:
        """The messages of a delta-channel thread, replayed from the inner saver's write history."""
        history = yield Step.of(self._inner, "get_delta_channel_history", config=config, channels=[_KEY])
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

    def _advance(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata) -> Due | None:
        """Move the thread's counters to ``checkpoint``; return a `Due` when a finished turn may need a summary."""
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
        if not finished_turn(checkpoint, metadata):
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
            return Due(memo, True, list(value.value) if value is not None else None)
        return Due(memo, False, list(value))

    def _plan(self, due: Due, messages: _Messages) -> Plan | None:
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
        self, due: Due, checkpoint: Checkpoint, metadata: CheckpointMetadata, plan: Plan, text: str
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

    def _committed(self, due: Due, checkpoint_id: str, messages: _Messages, text: str) -> None:
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
