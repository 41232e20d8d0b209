"""Fake chat models for tests, examples and offline demos.

`FakeChatModel` replays scripted replies; `FunctionChatModel` asks a function for each reply.
Both are real `BaseChatModel`s: they stream (text, tool-call chunks, reasoning), bind tools,
support `with_structured_output`, report usage and record every call in `.calls`.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, Literal, cast

from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda, RunnableMap, RunnablePassthrough
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from ai_utils._utils import is_async_callable, run_sync
from ai_utils.exceptions import UserError
from ai_utils.llm._chat_model import StreamingMessageChatModel
from ai_utils.testing._replies import Reply, check_reply, message_to_chunks, to_ai_message
from ai_utils.testing._structured import StructuredParser

__all__ = ["FakeChatModel", "FunctionChatModel", "sequence_model", "static_model"]

# One lock for every fake: contention does not matter in tests, and a lock stored on the
# instance would break `copy.deepcopy` and pickling of the model.
_LOCK = threading.Lock()

StructuredMethod = Literal["function_calling", "json_mode", "json_schema"]
ReplyFunction = Callable[[list[BaseMessage], list[dict[str, Any]]], Any]
"""``fn(messages, tools) -> str | AIMessage | Mapping`` (or an awaitable of one)."""


class _ScriptedChatModel(StreamingMessageChatModel):
    """Shared machinery: call recording, reply -> `AIMessage`, streaming, tools, structured output."""

    model_name: str = Field(default="fake-chat-model", alias="model")
    """Reported as ``response_metadata["model_name"]`` and in tracing params."""
    temperature: float | None = None
    """Accepted for drop-in compatibility; has no effect."""
    max_tokens: int | None = None
    """Accepted for drop-in compatibility; has no effect."""
    timeout: float | None = None
    """Accepted for drop-in compatibility; has no effect."""
    stop: list[str] | None = None
    """Accepted for drop-in compatibility; has no effect."""
    max_retries: int | None = None
    """Accepted for drop-in compatibility; has no effect."""
    streaming: bool = False
    """If True, ``invoke`` goes through the streaming path (as with real providers)."""

    model_config = ConfigDict(populate_by_name=True)

    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    # Part of every generated tool-call id: the call counter restarts with each instance (and process), so
    # without it a thread continued by a second process would get ids it already holds.
    _token: str = PrivateAttr(default_factory=lambda: uuid.uuid4().hex[:8])

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """The messages each model call received, in call order (a snapshot copy)."""
        with _LOCK:
            return [list(messages) for messages in self._calls]

    def _record(self, messages: list[BaseMessage]) -> int:
        with _LOCK:
            self._calls.append(list(messages))
            return len(self._calls)

    def _reply(self, call_no: int, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Reply:
        raise NotImplementedError

    async def _areply(self, call_no: int, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Reply:
        return self._reply(call_no, messages, tools)

    def _where(self, call_no: int) -> str:
        raise NotImplementedError

    def _finish(self, reply: Reply, call_no: int, messages: list[BaseMessage]) -> AIMessage:
        return to_ai_message(
            reply,
            call_no=call_no,
            messages=messages,
            model_name=self.model_name,
            where=self._where(call_no),
            token=self._token,
        )

    def _message(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> AIMessage:
        call_no = self._record(messages)
        return self._finish(self._reply(call_no, list(messages), _tools(kwargs)), call_no, messages)

    async def _amessage(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> AIMessage:
        call_no = self._record(messages)
        return self._finish(await self._areply(call_no, list(messages), _tools(kwargs)), call_no, messages)

    def _message_chunks(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> Iterator[AIMessageChunk]:
        yield from message_to_chunks(self._message(messages, stop, kwargs))

    async def _amessage_chunks(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> AsyncIterator[AIMessageChunk]:
        for chunk in message_to_chunks(await self._amessage(messages, stop, kwargs)):
            yield chunk
            # Hand control back so consumers see each chunk as it comes.
            await asyncio.sleep(0)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "fake"
        return params

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools; each call then receives them as OpenAI tool dicts (``kwargs["tools"]``).

        Args:
            tools: tools, functions, pydantic classes or tool dicts (anything `convert_to_openai_tool` takes).
            tool_choice: recorded like a real provider would receive it; the fake does not enforce it.
            **kwargs: further bound call arguments.

        Returns:
            The model bound to the converted tools.
        """
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: StructuredMethod = "function_calling",
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """Parse each reply into ``schema``, like a provider's structured output.

        The schema is bound as the only tool (so `FunctionChatModel` functions see it). A reply is
        accepted when a tool call's args (the one named after the schema, else the first) or its
        JSON text content (a ```json fence is allowed) validates; all three ``method`` values behave
        the same.

        Args:
            schema: a pydantic model class (gives instances), a TypedDict (gives validated dicts) or a
                JSON-schema / OpenAI-tool dict (gives dicts; type and required keys are checked).
            include_raw: if True, return ``{"raw": AIMessage, "parsed": ..., "parsing_error": ...}``
                and capture parsing errors instead of raising them, exactly as LangChain does.
            method: accepted for compatibility with real providers.
            strict: accepted for compatibility with real providers.
            **kwargs: not supported; passing any raises `UserError`.

        Returns:
            A runnable producing the parsed value (or the include_raw dict).

        Raises:
            UserError: for an unknown ``method`` or extra keyword arguments.
        """
        if kwargs:
            raise UserError(f"with_structured_output() got unsupported arguments {sorted(kwargs)!r}. Remove them.")
        if method not in ("function_calling", "json_mode", "json_schema"):
            raise UserError(
                f"Unknown structured-output method {method!r}. Use 'function_calling', 'json_mode' or 'json_schema'."
            )
        llm = self.bind_tools(
            [schema],
            tool_choice="any",
            ls_structured_output_format={"kwargs": {"method": method, "strict": strict}, "schema": schema},
        )
        parser = RunnableLambda(StructuredParser(schema).parse, name="StructuredOutputParser")
        if not include_raw:
            return cast("Runnable[LanguageModelInput, dict[str, Any] | BaseModel]", llm | parser)
        parser_assign = RunnablePassthrough.assign(parsed=itemgetter("raw") | parser, parsing_error=lambda _: None)
        parser_none = RunnablePassthrough.assign(parsed=lambda _: None)
        with_fallback = parser_assign.with_fallbacks([parser_none], exception_key="parsing_error")
        return cast("Runnable[LanguageModelInput, dict[str, Any] | BaseModel]", RunnableMap(raw=llm) | with_fallback)


def _tools(kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(kwargs.get("tools") or [])


class FakeChatModel(_ScriptedChatModel):
    """A chat model that replays scripted replies, one per model call, in order.

    Each reply is a ``str``, an ``AIMessage`` or a mapping
    ``{"content": str, "tool_calls": [{"name", "args", "id"?}], "reasoning": str}`` (all keys
    optional; missing tool-call ids become ``call_<call number>_<index>_<instance token>``, unique across
    model instances and processes). A mapping's ``"logprobs"``
    (``{"A": -0.1, "B": -2.4}``: token -> log-probability of the first answer token) becomes
    ``response_metadata["logprobs"]`` in the OpenAI shape, for ``classify(..., llm=...)``. Streaming yields the
    reasoning (as ``additional_kwargs["reasoning_content"]``, a ``{"type": "reasoning"}`` content
    block), the text in word pieces and the tool calls as ``tool_call_chunks``; every reply carries
    small word-count ``usage_metadata``. Running out of replies raises `UserError`.

    Example:
        ```python
        from langchain.agents import create_agent
        from langchain_core.tools import tool

        from ai_utils.testing import FakeChatModel


        @tool
        def get_weather(city: str) -> str:
            \"\"\"Return the weather for a city.\"\"\"
            return f"Sunny in {city}"


        model = FakeChatModel(
            [
                {"tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]},
                "It is sunny in Paris.",
            ]
        )
        agent = create_agent(model=model, tools=[get_weather])
        result = agent.invoke({"messages": [("user", "Weather in Paris?")]})
        assert result["messages"][-1].content == "It is sunny in Paris."
        assert len(model.calls) == 2  # the messages each model call received
        ```

    Args:
        responses: the scripted replies.
        **kwargs: further fields: ``cycle=True`` repeats the replies forever; ``model`` sets the
            reported model name; ``temperature``, ``max_tokens`` etc. are accepted and ignored.
    """

    responses: list[Any]
    """The scripted replies: ``str``, ``AIMessage`` or mapping."""
    cycle: bool = False
    """If True, start again at the first reply after the last one instead of raising."""

    def __init__(self, responses: Sequence[Reply], **kwargs: Any) -> None:
        super().__init__(responses=responses, **kwargs)  # type: ignore[call-arg]

    @field_validator("responses", mode="before")
    @classmethod
    def _check_responses(cls, value: Any) -> Any:
        if isinstance(value, (str, bytes, AIMessage, Mapping)):
            raise UserError(
                f"responses must be a list of replies, got {value!r}. Wrap it in a list: responses=[...], "
                "or use static_model(text) for one reply repeated forever."
            )
        replies = list(value)
        for index, reply in enumerate(replies):
            check_reply(reply, where=f"responses[{index}]")
        return replies

    @property
    def _llm_type(self) -> str:
        return "fake-chat-model"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "responses": len(self.responses), "cycle": self.cycle}

    @classmethod
    def is_lc_serializable(cls) -> bool:
        """Scripted fakes can be dumped and loaded with `langchain_core.load`."""
        return True

    @classmethod
    def get_lc_namespace(cls) -> list[str]:
        """The import path `langchain_core.load` uses to rebuild the model."""
        return ["ai_utils", "testing", "models"]

    def _where(self, call_no: int) -> str:
        return f"responses[{(call_no - 1) % max(len(self.responses), 1)}]"

    def _reply(self, call_no: int, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Reply:
        count = len(self.responses)
        if self.cycle and count:
            return cast("Reply", self.responses[(call_no - 1) % count])
        if call_no > count:
            raise UserError(
                f"FakeChatModel has no reply for call {call_no} ({count} scripted). "
                "Add more replies to responses=[...], or pass cycle=True to repeat them."
            )
        return cast("Reply", self.responses[call_no - 1])


class FunctionChatModel(_ScriptedChatModel):
    """A chat model whose every reply comes from ``fn(messages, tools)``.

    ``fn`` gets the list of messages of this call and the bound tools as OpenAI tool dicts
    (``{"type": "function", "function": {"name", "description", "parameters"}}``, empty if none),
    and returns a ``str``, an ``AIMessage`` or a mapping as in `FakeChatModel`. An ``async def fn``
    works with ``ainvoke``/``astream`` and, outside a running event loop, with ``invoke``/``stream``.

    Example:
        ```python
        from ai_utils.testing import FunctionChatModel


        def reply(messages, tools):
            return f"You said {messages[-1].text!r}; I have {len(tools)} tools."


        model = FunctionChatModel(reply)
        assert model.invoke("hi").content == "You said 'hi'; I have 0 tools."
        ```

    Args:
        fn: decides each reply.
        **kwargs: further fields, as for `FakeChatModel`.
    """

    fn: Callable[..., Any]
    """``fn(messages, tools) -> str | AIMessage | Mapping``, sync or async."""

    def __init__(self, fn: ReplyFunction, **kwargs: Any) -> None:
        super().__init__(fn=fn, **kwargs)  # type: ignore[call-arg]

    @property
    def _llm_type(self) -> str:
        return "function-chat-model"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "fn": getattr(self.fn, "__qualname__", repr(self.fn))}

    def _where(self, call_no: int) -> str:
        return f"the reply of fn for call {call_no}"

    def _reply(self, call_no: int, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Reply:
        if is_async_callable(self.fn):
            return cast("Reply", run_sync(lambda: self.fn(messages, tools), what="invoke() with an async fn"))
        return cast("Reply", self.fn(messages, tools))

    async def _areply(self, call_no: int, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Reply:
        result = self.fn(messages, tools)
        if inspect.isawaitable(result):
            result = await result
        return cast("Reply", result)


def static_model(text: str) -> FakeChatModel:
    """A fake model that answers every call with ``text``.

    Args:
        text: the reply.

    Returns:
        A `FakeChatModel` cycling over the one reply.
    """
    return FakeChatModel([text], cycle=True)


def sequence_model(texts: Sequence[str]) -> FakeChatModel:
    """A fake model that answers with ``texts`` in order and then starts again, forever.

    Args:
        texts: the replies; at least one.

    Returns:
        A cycling `FakeChatModel`.

    Raises:
        UserError: when ``texts`` is empty or a str.
    """
    if isinstance(texts, str) or not texts:
        raise UserError(f"sequence_model() needs a non-empty list of texts, got {texts!r}. Pass e.g. ['a', 'b'].")
    return FakeChatModel(list(texts), cycle=True)
