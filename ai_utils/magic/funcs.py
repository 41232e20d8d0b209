"""Magic funcs: one-call helpers to extract, structure, rewrite and summarize data with a chat model.

Every function takes ``data`` as a string or any JSON-serialisable value (rendered as indented JSON),
creates its model with `ai_utils.get_llm()` on each call when ``llm`` is None, and shares the retry
core of `ai_utils._structured` with its async twin. A text reply is *invalid* when it is empty or
whitespace only; the model then gets the error and another attempt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from ai_utils._structured import (
    InvalidReply,
    ainvoke_checked,
    ainvoke_structured,
    check_retries,
    check_schema,
    invoke_checked,
    invoke_structured,
    message_text,
    render_data,
    structured_messages,
)
from ai_utils.exceptions import UserError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["aextract", "arewrite", "astructure", "asummarize", "extract", "rewrite", "structure", "summarize"]

M = TypeVar("M", bound=BaseModel)

# extract() has no `retries` argument in the public contract; it gets the same budget as structure().
EXTRACT_RETRIES = 2
# summarize() has no `retries` argument: one extra attempt for an empty or over-long reply.
SUMMARIZE_RETRIES = 1

_EXTRACT = (
    "Extract the information the schema asks for from the user's data. "
    "Use only facts stated in the data; never invent values."
)
_STRUCTURE = "Restructure the user's data into the schema. Keep every piece of information that fits a field."
_REWRITE = "Rewrite the user's text following the instruction. Reply with the rewritten text only, no preamble."
_SUMMARIZE = "Summarize the user's data. Reply with the summary only, no preamble."


def _model(llm: BaseChatModel | None) -> BaseChatModel:
    if llm is not None:
        return llm
    from ai_utils.llm import get_llm

    return get_llm()


def _extract_messages(data: Any, schema: type[BaseModel], goal: str | None) -> list[BaseMessage]:
    check_schema(schema, argument="extract(schema=...)")
    system = f"{_EXTRACT}\nGoal: {goal}" if goal else _EXTRACT
    return structured_messages(system, render_data(data), schema)


def _structure_messages(data: Any, into: type[BaseModel]) -> list[BaseMessage]:
    check_schema(into, argument="structure(into=...)")
    return structured_messages(_STRUCTURE, render_data(data), into)


def _text_check(reply: Any, last: bool) -> str:
    text = message_text(reply).strip()
    if not text:
        raise InvalidReply("the reply was empty; answer with the text itself", output=message_text(reply))
    return text


def _rewrite_call(data: Any, instruction: str, retries: int) -> tuple[list[BaseMessage], dict[str, Any]]:
    if not isinstance(instruction, str) or not instruction.strip():
        raise UserError(f"rewrite() needs a non-empty instruction, got {instruction!r}. Pass e.g. 'Make it formal.'")
    messages: list[BaseMessage] = [
        SystemMessage(f"{_REWRITE}\nInstruction: {instruction}"),
        HumanMessage(render_data(data)),
    ]
    loop = {
        "retries": check_retries(retries),
        "what": "rewrite()",
        "fix": "rephrase the instruction, raise `retries`, or use a stronger model.",
    }
    return messages, loop


def _words(text: str) -> list[str]:
    return text.split()


def _summary_check(max_words: int | None) -> Callable[[Any, bool], str]:
    def check(reply: Any, last: bool) -> str:
        text = _text_check(reply, last)
        if max_words is None or len(_words(text)) <= max_words:
            return text
        if last:  # over the limit on the final attempt: keep the first `max_words` words
            return " ".join(_words(text)[:max_words])
        raise InvalidReply(
            f"the summary has {len(_words(text))} words but must have at most {max_words}; shorten it",
            output=text,
        )

    return check


def _summarize_call(data: Any, focus: str | None, max_words: int | None) -> tuple[list[BaseMessage], dict[str, Any]]:
    if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1):
        raise UserError(f"summarize(max_words=...) must be an int >= 1 or None, got {max_words!r}. Pass e.g. 50.")
    system = _SUMMARIZE
    if focus:
        system += f"\nFocus on: {focus}"
    if max_words is not None:
        system += f"\nUse at most {max_words} words."
    loop = {
        "retries": SUMMARIZE_RETRIES,
        "what": "summarize()",
        "fix": "check the data is not empty, or use a stronger model.",
    }
    return [SystemMessage(system), HumanMessage(render_data(data))], loop


def extract(data: Any, schema: type[M], *, goal: str | None = None, llm: BaseChatModel | None = None) -> M:
    """Extract the facts ``schema`` describes from ``data``.

    Example:
        ```python
        person = extract("Max is 30 and lives in Berlin.", Person)  # Person(name="Max", age=30, city="Berlin")
        ```

    Args:
        data: a string or any JSON-serialisable value.
        schema: the pydantic model to fill.
        goal: optional extra guidance, e.g. ``"only the billing address"``.
        llm: the chat model; defaults to `ai_utils.get_llm()`.

    Returns:
        A validated ``schema`` instance.

    Raises:
        UserError: ``schema`` is not a pydantic model class.
        ModelOutputError: the reply did not validate after 2 extra attempts.
    """
    messages = _extract_messages(data, schema, goal)
    return invoke_structured(_model(llm), messages, schema, retries=EXTRACT_RETRIES)


async def aextract(data: Any, schema: type[M], *, goal: str | None = None, llm: BaseChatModel | None = None) -> M:
    """Async twin of `extract`."""
    messages = _extract_messages(data, schema, goal)
    return await ainvoke_structured(_model(llm), messages, schema, retries=EXTRACT_RETRIES)


def structure(data: Any, into: type[M], *, retries: int = 2, llm: BaseChatModel | None = None) -> M:
    """Reshape ``data`` into an instance of ``into``.

    Args:
        data: a string or any JSON-serialisable value.
        into: the pydantic model to produce.
        retries: extra attempts after the first when the reply does not validate (each gets the error).
        llm: the chat model; defaults to `ai_utils.get_llm()`.

    Returns:
        A validated ``into`` instance.

    Raises:
        UserError: ``into`` is not a pydantic model class or ``retries`` is negative.
        ModelOutputError: the reply did not validate after ``retries`` extra attempts.
    """
    messages = _structure_messages(data, into)
    return invoke_structured(_model(llm), messages, into, retries=retries)


async def astructure(data: Any, into: type[M], *, retries: int = 2, llm: BaseChatModel | None = None) -> M:
    """Async twin of `structure`."""
    messages = _structure_messages(data, into)
    return await ainvoke_structured(_model(llm), messages, into, retries=retries)


def rewrite(data: Any, instruction: str, *, retries: int = 2, llm: BaseChatModel | None = None) -> str:
    """Rewrite ``data`` following ``instruction``.

    Args:
        data: a string or any JSON-serialisable value.
        instruction: how to rewrite, e.g. ``"Make it a short, professional e-mail."``.
        retries: extra attempts after the first when the reply is empty or whitespace only.
        llm: the chat model; defaults to `ai_utils.get_llm()`.

    Returns:
        The rewritten text, stripped.

    Raises:
        UserError: ``instruction`` is empty or ``retries`` is negative.
        ModelOutputError: every reply was empty.
    """
    messages, loop = _rewrite_call(data, instruction, retries)
    return invoke_checked(_model(llm), messages, _text_check, **loop)


async def arewrite(data: Any, instruction: str, *, retries: int = 2, llm: BaseChatModel | None = None) -> str:
    """Async twin of `rewrite`."""
    messages, loop = _rewrite_call(data, instruction, retries)
    return await ainvoke_checked(_model(llm), messages, _text_check, **loop)


def summarize(
    data: Any, *, focus: str | None = None, max_words: int | None = None, llm: BaseChatModel | None = None
) -> str:
    """Summarize ``data``.

    ``max_words`` is a hard limit: a longer reply is sent back once with its word count; if the second
    reply is still too long it is cut to its first ``max_words`` words. An empty reply is retried once.

    Args:
        data: a string or any JSON-serialisable value.
        focus: what the summary should concentrate on.
        max_words: the most words the summary may have (words are whitespace-separated).
        llm: the chat model; defaults to `ai_utils.get_llm()`.

    Returns:
        The summary text, stripped.

    Raises:
        UserError: ``max_words`` is not a positive int.
        ModelOutputError: both replies were empty.
    """
    messages, loop = _summarize_call(data, focus, max_words)
    return invoke_checked(_model(llm), messages, _summary_check(max_words), **loop)


async def asummarize(
    data: Any, *, focus: str | None = None, max_words: int | None = None, llm: BaseChatModel | None = None
) -> str:
    """Async twin of `summarize`."""
    messages, loop = _summarize_call(data, focus, max_words)
    return await ainvoke_checked(_model(llm), messages, _summary_check(max_words), **loop)
