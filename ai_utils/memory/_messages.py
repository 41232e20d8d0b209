"""Checkpoint helpers: read a thread's messages, render them as a transcript, summarize them.

These are pure functions over LangChain messages and LangGraph checkpoint objects; the only I/O is
the summarizer's model call (sync `chat_summarizer`, async `achat_summarizer`) and, for delta-channel
threads, reading ancestor writes from a saver.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite, StateSnapshot

from ai_utils._compat.langgraph import DeltaSnapshot
from ai_utils.exceptions import UserError
from ai_utils.memory._methods import Flow, Step, twins

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.checkpoint.base import DeltaChannelHistory

__all__ = [
    "achat_summarizer",
    "aget_messages_array_from_checkpoint",
    "chat_summarizer",
    "format_checkpoint_messages_for_llm",
    "get_messages_array_from_checkpoint",
]

_SUMMARY_FOCUS = (
    "This is a chat transcript between a user and an AI assistant (with tool calls and tool results). "
    "Write ONE rolling summary that a model can use as memory to continue the conversation: keep every "
    "fact the user stated about themselves, their goals, decisions, open questions, and the key results "
    "of tool calls. Merge the previous summary, if there is one, with the new messages; drop nothing "
    "important from it. Write plain prose in the conversation's language."
)


def _check_positive(value: Any, *, argument: str, fix: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{argument} must be an int >= 1, got {value!r}. {fix}")


def _check_optional_positive(value: Any, *, argument: str) -> None:
    if value is not None:
        _check_positive(value, argument=argument, fix="Pass e.g. 3000, or None for no limit.")


def _truncate(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]} … [truncated {len(text) - limit} chars]"


def _tool_call_text(call: Mapping[str, Any]) -> str:
    args = json.dumps(call.get("args") or {}, ensure_ascii=False, sort_keys=True, default=str)
    return f"{call.get('name') or 'tool'}({args})"


def _message_lines(message: BaseMessage, tool_names: Mapping[str, str], limit: int | None) -> list[str]:
    text = str(message.text).strip()
    if isinstance(message, HumanMessage):
        return [f"User: {text}"]
    if isinstance(message, AIMessage):
        lines = [f"Assistant: {text}"] if text else []
        lines.extend(f"Assistant called {_tool_call_text(call)}" for call in message.tool_calls)
        return lines or ["Assistant: "]
    if isinstance(message, ToolMessage):
        name = message.name or tool_names.get(message.tool_call_id) or "tool"
        return [f"Tool {name}: {_truncate(text, limit)}"]
    if isinstance(message, SystemMessage):
        return [f"System: {text}"]
    return [f"{message.type.capitalize()}: {text}"]


def format_checkpoint_messages_for_llm(messages: Any, *, max_tool_result_chars: int | None = None) -> str:
    """Render a conversation as a readable transcript for a prompt.

    One line per message: ``User: ...``, ``Assistant: ...``, ``Assistant called get_weather({"city": "Paris"})``
    for each tool call, ``Tool get_weather: ...`` for a tool result (named after its call) and
    ``System: ...``. Only the text of a message is shown (reasoning blocks are left out).

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from ai_utils.memory import format_checkpoint_messages_for_llm

        text = format_checkpoint_messages_for_llm(
            [
                HumanMessage("Weather in Paris?"),
                AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]),
                ToolMessage("Sunny", tool_call_id="c1"),
                AIMessage("It is sunny."),
            ]
        )
        # User: Weather in Paris?
        # Assistant called get_weather({"city": "Paris"})
        # Tool get_weather: Sunny
        # Assistant: It is sunny.
        ```

    Args:
        messages: a sequence of messages, or anything `get_messages_array_from_checkpoint` accepts
            (a checkpoint, a `CheckpointTuple`, a `StateSnapshot`, a state dict).
        max_tool_result_chars: cut each tool result to this many characters (the cut is marked);
            None keeps them whole.

    Returns:
        The transcript, lines joined with newlines (empty for no messages).

    Raises:
        UserError: ``messages`` is not a conversation, or ``max_tool_result_chars`` is not a positive int.
    """
    _check_optional_positive(max_tool_result_chars, argument="max_tool_result_chars")
    items = get_messages_array_from_checkpoint(messages)
    tool_names = {
        str(call["id"]): call["name"] for m in items if isinstance(m, AIMessage) for call in m.tool_calls if call["id"]
    }
    lines: list[str] = []
    for message in items:
        lines.extend(_message_lines(message, tool_names, max_tool_result_chars))
    return "\n".join(lines)


def _as_messages(value: Any, *, where: str) -> list[BaseMessage]:
    if isinstance(value, DeltaSnapshot):
        value = value.value
    if value is None:
        return []
    if isinstance(value, BaseMessage):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(m, BaseMessage) for m in value):
        return list(value)
    raise UserError(
        f"{where} holds {type(value).__name__} {_short_repr(value)}, not a list of messages. "
        "Pass a message list, a checkpoint, a CheckpointTuple, a StateSnapshot or a state dict."
    )


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _replay(history: DeltaChannelHistory) -> list[BaseMessage]:
    seed = history.get("seed")
    messages: list[Any] = _as_messages(seed, where="the delta snapshot")
    for _task, _channel, value in history["writes"]:
        if isinstance(value, Overwrite):
            messages = _as_messages(value.value, where="an Overwrite write")
        else:
            messages = cast("list[Any]", add_messages(messages, value))
    return cast("list[BaseMessage]", messages)


def _check_saver(saver: Any) -> None:
    if saver is not None and not isinstance(saver, BaseCheckpointSaver):
        raise UserError(
            f"saver must be a LangGraph checkpoint saver, got {_short_repr(saver)}. "
            "Pass the checkpointer the thread was written with, or None."
        )


_TUPLE_FIX = "as `saver=` (e.g. `get_messages_array_from_checkpoint(saver.get_tuple(config), saver=saver)`)"
_DICT_FIX = "as `saver=` and the thread as `config={'configurable': {'thread_id': ...}}`"


def _delta_config(checkpoint: Mapping[str, Any], key: str, config: Any, saver: Any, *, bare: bool) -> RunnableConfig:
    """The config to replay ``key``'s delta channel at ``checkpoint``; `UserError` when it cannot be replayed.

    A checkpoint whose channel was written (it has a version) but holds no value keeps it as a delta: only the
    ancestors' writes in the saver hold the messages, so reading it alone would be a silent ``[]``.
    """
    thread = config.get("configurable") if isinstance(config, Mapping) else None
    if saver is None or not isinstance(thread, Mapping) or not thread.get("thread_id"):
        what, fix = ("checkpoint", _DICT_FIX) if bare else ("CheckpointTuple", _TUPLE_FIX)
        raise UserError(
            f"This {what} stores {key!r} as a delta: only its ancestors' writes hold the messages. Pass the "
            f"checkpointer it came from {fix}, or pass `agent.get_state(thread_id)` (a StateSnapshot holds them all)."
        )
    # A bare checkpoint names itself; a CheckpointTuple's config names its checkpoint.
    checkpoint_id = checkpoint.get("id") if bare else thread.get("checkpoint_id")
    return {
        "configurable": {
            "thread_id": thread["thread_id"],
            "checkpoint_ns": thread.get("checkpoint_ns", ""),
            "checkpoint_id": checkpoint_id,
        }
    }


def _is_delta(checkpoint: Mapping[str, Any], key: str) -> bool:
    """``key`` was written (it has a channel version) but the checkpoint holds no value for it."""
    values = checkpoint.get("channel_values")
    versions = checkpoint.get("channel_versions")
    return isinstance(values, Mapping) and key not in values and isinstance(versions, Mapping) and key in versions


def _plan(source: Any, key: str, saver: Any, config: Any) -> list[BaseMessage] | RunnableConfig:
    """The messages read directly, or the config whose delta history the saver must replay."""
    _check_saver(saver)
    if isinstance(source, CheckpointTuple):
        if _is_delta(source.checkpoint, key):
            return _delta_config(source.checkpoint, key, source.config, saver, bare=False)
        values = source.checkpoint.get("channel_values", {})
        return _as_messages(values.get(key), where=f"channel_values[{key!r}]")
    if isinstance(source, Mapping) and _is_delta(source, key):
        return _delta_config(source, key, config, saver, bare=True)
    return _from_plain(source, key)


def get_messages_array_from_checkpoint(
    source: Any,
    *,
    key: str = "messages",
    saver: BaseCheckpointSaver[Any] | None = None,
    config: RunnableConfig | None = None,
) -> list[BaseMessage]:
    """Return the messages of a thread from a checkpoint-like object.

    Accepted sources: a list of messages (returned as a new list); a state dict (``graph.invoke``'s
    result, ``{"messages": [...]}``); a `StateSnapshot` (``graph.get_state(config)``, ``agent.get_state(thread)``);
    a `Checkpoint` dict (``checkpoint["channel_values"][key]``); a `CheckpointTuple` (``saver.get_tuple(config)``).

    Delta-channel threads (`Agent` and deepagents store ``messages`` in a LangGraph ``DeltaChannel``): a checkpoint
    between two snapshots does not hold the messages, only their ancestors' writes do. They are rebuilt from
    ``saver.get_delta_channel_history`` (snapshot + replayed writes, as LangGraph does) when you pass the
    ``saver`` the checkpoint came from (and, for a bare `Checkpoint` dict, the thread's ``config``); without it
    such a checkpoint raises `UserError` saying so, never a silent ``[]``. A `StateSnapshot` always holds the
    whole list.

    Args:
        source: the checkpoint-like object.
        key: the state key (channel) that holds the messages.
        saver: the checkpointer the checkpoint was read from, to rebuild delta-channel messages.
        config: for a bare `Checkpoint` dict of a delta-channel thread: ``{"configurable": {"thread_id": ...}}``
            (its ``checkpoint_id`` defaults to the checkpoint's own id).

    Returns:
        The messages, oldest first.

    Raises:
        UserError: ``source`` holds no message list under ``key``, ``saver`` is not a checkpoint saver, or the
            messages are in a delta channel and no ``saver`` (and thread ``config``) was given to replay it.
    """
    plan = _plan(source, key, saver, config)
    if isinstance(plan, list):
        return plan
    assert saver is not None  # _plan asks for a replay only with a saver
    return _replay(saver.get_delta_channel_history(config=plan, channels=[key])[key])


async def aget_messages_array_from_checkpoint(
    source: Any,
    *,
    key: str = "messages",
    saver: BaseCheckpointSaver[Any] | None = None,
    config: RunnableConfig | None = None,
) -> list[BaseMessage]:
    """Async twin of `get_messages_array_from_checkpoint` (reads delta history with the saver's async API)."""
    plan = _plan(source, key, saver, config)
    if isinstance(plan, list):
        return plan
    assert saver is not None
    return _replay((await saver.aget_delta_channel_history(config=plan, channels=[key]))[key])


def _from_plain(source: Any, key: str) -> list[BaseMessage]:
    if isinstance(source, StateSnapshot):
        return _as_messages(source.values.get(key) if isinstance(source.values, Mapping) else None, where="values")
    if isinstance(source, Mapping):
        if "channel_values" in source and isinstance(source["channel_values"], Mapping):
            return _as_messages(source["channel_values"].get(key), where=f"channel_values[{key!r}]")
        if key in source:
            return _as_messages(source[key], where=f"state[{key!r}]")
        raise UserError(
            f"The state dict has no {key!r} key (keys: {sorted(map(str, source))!r}). "
            "Pass key='<your messages key>' or the graph state that holds the messages."
        )
    return _as_messages(source, where="source")


def _summary_prompt(
    messages: Sequence[BaseMessage], previous_summary: str | None, max_tool_result_chars: int | None
) -> str:
    transcript = format_checkpoint_messages_for_llm(list(messages), max_tool_result_chars=max_tool_result_chars)
    parts = []
    if previous_summary and previous_summary.strip():
        parts.append(f"Previous summary:\n{previous_summary.strip()}")
    parts.append(f"New messages:\n{transcript}" if transcript else "New messages: (none)")
    return "\n\n".join(parts)


def _check_summarizer_args(
    messages: Any, previous_summary: Any, max_words: Any, max_tool_result_chars: Any
) -> Sequence[BaseMessage]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise UserError(f"chat_summarizer needs a sequence of messages, got {_short_repr(messages)}. Pass a list.")
    items = _as_messages(list(messages), where="messages")
    if previous_summary is not None and not isinstance(previous_summary, str):
        raise UserError(f"previous_summary must be a str or None, got {_short_repr(previous_summary)}.")
    if not items and not (previous_summary or "").strip():
        raise UserError("chat_summarizer got no messages and no previous summary. Pass the messages to summarize.")
    _check_positive(max_words, argument="max_words", fix="Pass e.g. 300.")
    _check_optional_positive(max_tool_result_chars, argument="max_tool_result_chars")
    return items


def _chat_summary(
    messages: Sequence[BaseMessage],
    *,
    llm: BaseChatModel | None = None,
    previous_summary: str | None = None,
    max_words: int = 300,
    max_tool_result_chars: int | None = 3000,
) -> Flow[str]:
    """Fold a conversation (and the previous rolling summary) into one rolling summary.

    The messages are rendered with `format_checkpoint_messages_for_llm` (tool results cut to
    ``max_tool_result_chars``) and summarized by `ai_utils.summarize`, which enforces ``max_words``
    (one retry, then a hard cut) and retries an empty reply once. `SmartCheckpointSaver` calls this.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage

        from ai_utils.memory import chat_summarizer
        from ai_utils.testing import static_model

        summary = chat_summarizer(
            [HumanMessage("Ich heisse Max."), AIMessage("Hallo Max!")],
            previous_summary="Max wants to plan a trip to Rome.",
            llm=static_model("Max (the user) plans a trip to Rome."),
        )
        ```

    Args:
        messages: the messages to fold in, oldest first.
        llm: the chat model; defaults to `ai_utils.get_llm()` (created on each call).
        previous_summary: the rolling summary so far, merged into the new one.
        max_words: the most words the summary may have.
        max_tool_result_chars: cut each tool result to this many characters in the prompt; None keeps them.

    Returns:
        The new summary text.

    Raises:
        UserError: bad arguments, or neither messages nor a previous summary.
        ModelOutputError: the model replied with empty text twice.
    """
    from ai_utils.magic import asummarize, summarize

    items = _check_summarizer_args(messages, previous_summary, max_words, max_tool_result_chars)
    prompt = _summary_prompt(items, previous_summary, max_tool_result_chars)
    options = {"focus": _SUMMARY_FOCUS, "max_words": max_words, "llm": llm}
    summary: str = yield Step(summarize, asummarize, (prompt,), options)
    return summary


chat_summarizer, achat_summarizer = twins(_chat_summary, "chat_summarizer")
