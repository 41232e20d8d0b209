"""Ask a chat model for a reply that passes a check, retrying with the error fed back.

One core for `Chain(output=...)` and the magic funcs. The attempt loop is a small sans-IO state
machine (`_Attempts`): it builds the messages for the next attempt, judges a reply and decides whether
to retry or raise. `invoke_checked`/`ainvoke_checked` are the thin sync/async shells that call the model.

Structured output goes through the model's own ``with_structured_output(schema, include_raw=True)``
(native JSON schema / tool calling), falling back to plain text parsed with pydantic for models that
do not implement it. Either way, the system message also carries the JSON schema, so a streamed or
plain reply is JSON too.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSequence
from pydantic import BaseModel, ValidationError

from ai_utils.exceptions import ModelOutputError, UserError

__all__ = [
    "InvalidReply",
    "ainvoke_checked",
    "ainvoke_structured",
    "check_retries",
    "check_schema",
    "invoke_checked",
    "invoke_structured",
    "message_text",
    "StructuredCall",
    "parse_json_reply",
    "render_data",
    "schema_instructions",
    "structured_check",
    "structured_messages",
    "structured_call",
]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class InvalidReply(Exception):
    """A reply failed the check; ``message`` is fed back to the model."""

    def __init__(self, message: str, *, output: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.output = output


# A check turns one model reply into the final value, or raises InvalidReply. `last` is True on the final
# attempt, so a check may accept a degraded answer instead of failing (e.g. truncate an over-long summary).
Check = Callable[[Any, bool], T]


def message_text(message: BaseMessage) -> str:
    """The plain text of a chat message (string content or the text blocks of a list)."""
    return str(message.text)


def render_data(data: Any) -> str:
    """Render user data for a prompt: strings as they are, anything else as indented JSON."""
    if isinstance(data, str):
        return data
    if isinstance(data, BaseModel):
        return data.model_dump_json(indent=2)
    return json.dumps(data, ensure_ascii=False, indent=2, default=str)


def check_retries(retries: int) -> int:
    """Validate a ``retries`` argument (extra attempts after the first)."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise UserError(f"retries must be an int >= 0 (extra attempts after the first), got {retries!r}. Pass e.g. 2.")
    return retries


def check_schema(schema: Any, *, argument: str) -> None:
    """Raise `UserError` unless ``schema`` is a pydantic model class."""
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise UserError(
            f"{argument} must be a pydantic model class, got {schema!r}. "
            "Define `class MySchema(BaseModel): ...` and pass the class itself."
        )


@functools.lru_cache(maxsize=256)
def schema_instructions(schema: type[BaseModel]) -> str:
    """The system-prompt paragraph that asks for JSON matching ``schema`` (cached: JSON schemas are costly)."""
    schema_json = json.dumps(schema.model_json_schema(), ensure_ascii=False)
    return (
        f"Reply with one JSON object that matches the `{schema.__name__}` JSON schema below. "
        f"Reply with the JSON only: no prose, no code fences.\n{schema_json}"
    )


def parse_json_reply(text: str, schema: type[M]) -> M:
    """Validate a text reply (optionally inside a Markdown code fence) into ``schema``."""
    fenced = _FENCE.match(text)
    try:
        return schema.model_validate_json(fenced.group(1) if fenced else text.strip())
    except ValidationError as error:
        raise InvalidReply(str(error), output=text) from None


def _raw_output(message: BaseMessage) -> str | None:
    """What the model said, for the retry prompt: its text, else its first tool call's arguments."""
    text = message_text(message)
    calls = getattr(message, "tool_calls", None)
    if not text and calls:
        return json.dumps(calls[0].get("args"), ensure_ascii=False, default=str)
    return text or None


def structured_check(schema: type[M], parser: Runnable[Any, Any] | None = None) -> Check[M]:
    """The check for a structured reply.

    A reply is the model's message, validated by ``parser`` (the model's own structured-output parser)
    or, without one, parsed from its JSON text; or an ``include_raw`` dict.
    """

    def check(reply: Any, last: bool) -> M:
        if isinstance(reply, BaseMessage):
            if parser is None:  # a model without native structured output
                return parse_json_reply(message_text(reply), schema)
            try:
                parsed = parser.invoke(reply)
            except (OutputParserException, ValidationError, ValueError) as error:
                raise InvalidReply(str(error), output=_raw_output(reply)) from None
            if isinstance(parsed, schema):
                return parsed
            raise InvalidReply(f"the reply held no `{schema.__name__}` object", output=_raw_output(reply))
        raw = reply.get("raw")
        raw_text = None if raw is None else message_text(raw)
        if reply.get("parsing_error") is not None:
            raise InvalidReply(str(reply["parsing_error"]), output=raw_text)
        parsed = reply.get("parsed")
        if isinstance(parsed, schema):
            return parsed
        # e.g. ChatOpenAI's json_schema parser yields None when the model answered with a tool call instead
        raise InvalidReply(f"the reply held no `{schema.__name__}` object", output=raw_text)

    return check


def _error_from_call(error: ValidationError) -> InvalidReply:
    """Providers that validate inside the HTTP call (ChatOpenAI's ``.parse``) raise instead of returning."""
    output = None
    # The raw text is gone with the exception; recover it where pydantic kept the whole input.
    details = error.errors()
    first = details[0] if details else None
    if first is not None and first["type"] == "json_invalid" and isinstance(first["input"], str):
        output = first["input"]
    elif first is not None and first["type"] == "missing" and len(first["loc"]) == 1:
        output = json.dumps(first["input"], ensure_ascii=False, default=str)
    return InvalidReply(str(error), output=output)


@dataclass
class _Attempts(Generic[T]):
    """The sans-IO retry loop shared by the sync and async shells."""

    messages: list[BaseMessage]
    check: Check[T]
    retries: int
    what: str
    fix: str
    attempt: int = 0
    history: list[BaseMessage] = field(default_factory=list)
    last: InvalidReply | None = None

    def __post_init__(self) -> None:
        self.history = list(self.messages)

    @property
    def is_last(self) -> bool:
        return self.attempt >= self.retries + 1

    def start(self) -> list[BaseMessage]:
        self.attempt += 1
        return self.history

    def judge(self, reply: Any) -> T:
        return self.check(reply, self.is_last)

    def failed(self, error: InvalidReply | ValidationError) -> None:
        """Record a failed attempt: feed the error back, or raise when no attempt is left.

        ``error`` is a rejected reply, or the validation error of a provider that validates in the call.
        """
        invalid = _error_from_call(error) if isinstance(error, ValidationError) else error
        self.last = invalid
        if self.is_last:
            raise ModelOutputError(
                f"The model's reply for {self.what} was invalid after {self.attempt} attempt(s). "
                f"Last error: {invalid.message} Fix: {self.fix}",
                errors=invalid.message,
                attempts=self.attempt,
                output=invalid.output,
            )
        shown = "(empty)" if not invalid.output else invalid.output
        self.history = [
            *self.messages,
            HumanMessage(
                f"Your previous reply was:\n{shown}\n\nIt was rejected: {invalid.message}\n"
                "Reply again, fixing exactly this problem."
            ),
        ]


def invoke_checked(
    runnable: Runnable[Any, Any],
    messages: Sequence[BaseMessage],
    check: Check[T],
    *,
    retries: int,
    what: str,
    fix: str,
    config: RunnableConfig | None = None,
) -> T:
    """Call ``runnable`` until ``check`` accepts a reply (sync shell of the retry loop).

    Args:
        runnable: a chat model or a structured-output runnable taking a message list.
        messages: the conversation for the first attempt.
        check: turns a reply into the value or raises `InvalidReply`.
        retries: extra attempts after the first.
        what: what was asked for, named in the error message.
        fix: the advice that ends the error message.
        config: a LangChain run config (callbacks, tags, ...) for every attempt.

    Returns:
        The first accepted value.

    Raises:
        ModelOutputError: every attempt was rejected.
    """
    state = _Attempts(list(messages), check, retries=retries, what=what, fix=fix)
    while True:
        try:
            return state.judge(runnable.invoke(state.start(), config))
        except (ValidationError, InvalidReply) as error:
            state.failed(error)


async def ainvoke_checked(
    runnable: Runnable[Any, Any],
    messages: Sequence[BaseMessage],
    check: Check[T],
    *,
    retries: int,
    what: str,
    fix: str,
    config: RunnableConfig | None = None,
) -> T:
    """Async twin of `invoke_checked`."""
    state = _Attempts(list(messages), check, retries=retries, what=what, fix=fix)
    while True:
        try:
            return state.judge(await runnable.ainvoke(state.start(), config))
        except (ValidationError, InvalidReply) as error:
            state.failed(error)


@dataclass(frozen=True)
class StructuredCall(Generic[M]):
    """A model's structured-output call split into its model step and its parser.

    Calling the two ourselves keeps the raw reply for the retry prompt without ``include_raw=True``,
    whose parallel branches run on threads and cost more than the model call of a fast model.
    """

    schema: type[M]
    model: Runnable[Any, Any]
    check: Check[M]


def structured_call(llm: BaseChatModel, schema: type[M]) -> StructuredCall[M]:
    """Build the structured call for ``llm`` and ``schema`` once; reuse it for every request."""
    try:
        full = llm.with_structured_output(schema)
    except NotImplementedError:
        return StructuredCall(schema, llm, structured_check(schema))
    if isinstance(full, RunnableSequence) and len(full.steps) == 2:
        return StructuredCall(schema, full.first, structured_check(schema, full.last))
    # An unfamiliar shape: let the model's own include_raw wrapper keep the raw reply.
    return StructuredCall(schema, llm.with_structured_output(schema, include_raw=True), structured_check(schema))


def structured_messages(system: str, human: str, schema: type[BaseModel]) -> list[BaseMessage]:
    """System (task + schema instructions) and human messages for a structured call."""
    system_text = f"{system}\n\n{schema_instructions(schema)}" if system else schema_instructions(schema)
    return [SystemMessage(system_text), HumanMessage(human)]


def _structured_loop(schema: type[M], retries: int) -> dict[str, Any]:
    return {
        "retries": check_retries(retries),
        "what": f"the `{schema.__name__}` schema",
        "fix": f"make the `{schema.__name__}` fields easier to fill (descriptions, optional fields), "
        "raise `retries`, or use a stronger model.",
    }


def invoke_structured(
    llm: BaseChatModel | StructuredCall[M],
    messages: Sequence[BaseMessage],
    schema: type[M],
    *,
    retries: int = 2,
    config: RunnableConfig | None = None,
) -> M:
    """Ask ``llm`` for an instance of ``schema``; ``retries`` extra attempts get the validation error.

    Args:
        llm: the chat model, or a `structured_call` built for it and ``schema`` (reused across requests).
        messages: the conversation (see `structured_messages`).
        schema: the pydantic model to validate into.
        retries: extra attempts after the first.
        config: a LangChain run config for every attempt.

    Returns:
        A validated ``schema`` instance.

    Raises:
        ModelOutputError: no attempt produced a valid instance; ``.errors`` holds the last validation message.
    """
    call = structured_call(llm, schema) if isinstance(llm, BaseChatModel) else llm
    return invoke_checked(call.model, messages, call.check, config=config, **_structured_loop(call.schema, retries))


async def ainvoke_structured(
    llm: BaseChatModel | StructuredCall[M],
    messages: Sequence[BaseMessage],
    schema: type[M],
    *,
    retries: int = 2,
    config: RunnableConfig | None = None,
) -> M:
    """Async twin of `invoke_structured`."""
    call = structured_call(llm, schema) if isinstance(llm, BaseChatModel) else llm
    return await ainvoke_checked(
        call.model, messages, call.check, config=config, **_structured_loop(call.schema, retries)
    )
