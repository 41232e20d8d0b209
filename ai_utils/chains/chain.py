"""`Chain`: a stateless prompt -> model (-> validated output) call, optionally grounded in a vector store.

A Chain holds no state between calls, so it is built straight on LangChain runnables rather than a
one-node LangGraph graph: a graph would add a state schema and a node wrapper but no checkpointing,
routing or interrupts, and the chat model's own ``invoke``/``ainvoke``/``stream``/``astream`` already
give every public pair. All message building is pure (`build_messages`), shared by the four shells.

How inputs reach the model: the system message is ``prompt`` (plus retrieved context and, with
``output``, the JSON schema); the human message has one ``key: value`` line per input, where a string
value is written as it is and any other value as compact JSON. ``thread_id`` is dropped.

A prompt with ``{name}`` fields is a template (Python format syntax, as LangChain's f-string templates):
the inputs fill it and it is sent as the human message; inputs it does not name follow as ``key: value``
lines; retrieved context and the schema stay in the system message. ``{{`` and ``}}`` are literal braces.
Field names must be plain names (no ``{a.b}`` or ``{a[0]}``: a prompt must not reach into objects). A
prompt whose braces hold no plain name at all (e.g. a JSON example) is sent as it is.
"""

from __future__ import annotations

import json
import string
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from pydantic import BaseModel

from ai_utils._run.args import check_run_config, reject_unknown
from ai_utils._run.runnable import WrapperRunnable, warn_sync_in_loop
from ai_utils._structured import (
    StructuredCall,
    ainvoke_structured,
    check_retries,
    check_schema,
    invoke_structured,
    message_text,
    schema_instructions,
    structured_call,
    structured_messages,
)
from ai_utils.exceptions import UserError
from ai_utils.rag.documents import turn_to_docs

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.vectorstores import VectorStore
    from opentelemetry.trace import TracerProvider

__all__ = [
    "Chain",
    "ChainInput",
    "build_messages",
    "check_inputs",
    "render_inputs",
    "retrieval_query",
    "template_fields",
]

_IGNORED_INPUTS = frozenset({"thread_id"})

OutputT = TypeVar("OutputT", bound="BaseModel | str")
M = TypeVar("M", bound=BaseModel)

ChainInput = Mapping[str, Any] | PromptValue | BaseMessage | Sequence[BaseMessage]
"""What a chain takes: named inputs, or (``prompt_template | chain``) a prompt value or messages."""


def render_inputs(inputs: Mapping[str, Any]) -> str:
    """Render chain inputs as ``key: value`` lines (strings as-is, other values as JSON)."""
    lines = []
    for key, value in inputs.items():
        if key in _IGNORED_INPUTS:
            continue
        lines.append(f"{key}: {_render_value(value)}")
    return "\n".join(lines)


def _render_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=_json_default)


def template_fields(prompt: str) -> tuple[str, ...]:
    """The ``{name}`` fields of a template prompt, in order; ``()`` for a prompt that is sent as it is.

    Raises:
        UserError: the prompt mixes ``{name}`` fields with other ``{...}`` fields (unescaped braces).
    """
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(prompt) if name is not None]
    except ValueError:  # unbalanced braces: not a template
        return ()
    names = [name for name in fields if name.isidentifier()]
    if not names:
        return ()
    other = [name for name in fields if not name.isidentifier()]
    if other:
        raise UserError(
            f"Chain prompt is a template (it names {names[0]!r}) but also holds {{{other[0]}}}. Fields must be "
            "plain names; write literal braces as `{{` and `}}`."
        )
    return tuple(dict.fromkeys(names))


def _fill(prompt: str, fields: Sequence[str], inputs: Mapping[str, Any]) -> str:
    missing = [name for name in fields if name not in inputs]
    if missing:
        raise UserError(
            f"Chain prompt needs the input {missing[0]!r}, got inputs {sorted(inputs)!r}. "
            f"Pass it: `chain.invoke({{{missing[0]!r}: ...}})`, or write literal braces as `{{{{` and `}}}}`."
        )
    values = {
        name: value if isinstance(value, str | int | float) else _render_value(value)
        for name, value in inputs.items()
        if name in fields
    }
    return prompt.format_map(values)


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


def check_inputs(inputs: Any) -> str:
    """Validate chain inputs and return them rendered (see `render_inputs`).

    Raises:
        UserError: ``inputs`` is not a mapping or holds nothing to send.
    """
    if not isinstance(inputs, Mapping):
        raise UserError(
            f"Chain inputs must be a mapping, got {inputs!r}. Pass a dict, e.g. `chain.invoke({{'question': ...}})`."
        )
    human = render_inputs(inputs)
    if not human:
        raise UserError(
            f"Chain inputs {dict(inputs)!r} hold nothing to send to the model. "
            "Pass at least one input besides `thread_id`, e.g. `{'question': '...'}`."
        )
    return human


def retrieval_query(inputs: Mapping[str, Any]) -> str:
    """The vector-store query: the ``question`` input if present, else all inputs as text."""
    question = inputs.get("question")
    if question is not None:
        return question if isinstance(question, str) else json.dumps(question, ensure_ascii=False, default=str)
    return render_inputs(inputs)


def render_context(documents: Sequence[Document]) -> str:
    """Retrieved documents as a numbered context block for the system message."""
    body = "\n\n".join(f"[{number}] {doc.page_content}" for number, doc in enumerate(documents, start=1))
    return f"Use the following context to answer.\n<context>\n{body}\n</context>"


def build_messages(
    prompt: str,
    inputs: Mapping[str, Any],
    *,
    documents: Sequence[Document] | None = None,
    output: type[BaseModel] | None = None,
) -> list[BaseMessage]:
    """The messages one chain call sends: system (prompt, context, schema) + human (inputs).

    Args:
        prompt: the chain's system prompt (may be empty), or a ``{name}`` template filled from ``inputs``.
        inputs: the call's inputs; ``thread_id`` is ignored.
        documents: retrieved context documents, if any.
        output: the output schema, if any.

    Returns:
        The message list.

    Raises:
        UserError: ``inputs`` is not a mapping or holds nothing to send.
    """
    fields = template_fields(prompt)
    if fields:
        check_inputs(inputs)
        rest = render_inputs({k: v for k, v in inputs.items() if k not in fields})
        human = _fill(prompt, fields, inputs) + (f"\n\n{rest}" if rest else "")
        system = ""
    else:
        human = check_inputs(inputs)
        system = prompt
    if documents:
        system = f"{system}\n\n{render_context(documents)}" if system else render_context(documents)
    if output is not None:
        return structured_messages(system, human, output)
    return [SystemMessage(system), HumanMessage(human)] if system else [HumanMessage(human)]


def as_messages(input: Any) -> list[BaseMessage] | None:
    """The messages of a prompt value or message list (``None`` for named inputs, a mapping).

    A bare str is refused: which input it would be is a guess (a template names several).
    """
    if isinstance(input, Mapping):
        return None
    if isinstance(input, PromptValue):
        return input.to_messages()
    if isinstance(input, BaseMessage):
        return [input]
    if isinstance(input, Sequence) and input and all(isinstance(m, BaseMessage) for m in input):
        return list(input)
    raise UserError(
        f"Chain inputs must be a mapping of named inputs (or a prompt value / messages from a prompt template), "
        f"got {input!r}. Pass a dict, e.g. `chain.invoke({{'question': ...}})`."
    )


def message_query(messages: Sequence[BaseMessage]) -> str:
    """The vector-store query of a message input: the last human message's text."""
    human = [m for m in messages if isinstance(m, HumanMessage)]
    return message_text(human[-1] if human else messages[-1])


def conversation_messages(
    prompt: str,
    messages: Sequence[BaseMessage],
    *,
    documents: Sequence[Document] | None = None,
    output: type[BaseModel] | None = None,
) -> list[BaseMessage]:
    """The messages for a message input: ours (prompt, context, schema) as the system message, then theirs.

    A system message at the start of ``messages`` is merged into ours (providers take one system message).

    Raises:
        UserError: the prompt is a ``{name}`` template, which needs named inputs.
    """
    fields = template_fields(prompt)
    if fields:
        raise UserError(
            f"Chain prompt is a template (it names {fields[0]!r}), so it needs named inputs, not messages or a "
            f"prompt value. Pass a mapping, e.g. `chain.invoke({{{fields[0]!r}: ...}})`, or give the Chain a plain "
            "prompt (the prompt template then writes the messages)."
        )
    parts = [prompt] if prompt else []
    rest = list(messages)
    if rest and isinstance(rest[0], SystemMessage):
        parts.append(message_text(rest.pop(0)))
    if documents:
        parts.append(render_context(documents))
    if output is not None:
        parts.append(schema_instructions(output))
    return [SystemMessage("\n\n".join(parts)), *rest] if parts else rest


class Chain(WrapperRunnable[OutputT]):
    """A stateless LLM call with an optional system prompt, validated output and retrieval context.

    Example:
        ```python
        chain = Chain(llm=get_llm(), prompt="You are a product marketer.", output=ProductBrief)
        brief = chain.invoke({"product": "AI notes for teams", "market": "DACH SaaS"})
        ```

    ``Chain(output=Model)`` is a ``Chain[Model]`` whose ``invoke`` returns ``Model``; without ``output`` it is a
    ``Chain[str]``. Every call method takes an optional LangChain ``config`` (callbacks, tags, metadata).

    A LangChain `Runnable`: ``prompt_template | chain`` (the prompt value's messages follow the chain's system
    message), ``chain | StrOutputParser()``, ``batch``, ``with_retry``, ``with_fallbacks``, ``astream_events``.
    Each call is one chain run in callbacks and traces, named ``Chain``, with the model call inside it.

    Args:
        llm: the chat model; defaults to `ai_utils.get_llm()` (created here, so a missing key fails early).
        prompt: the system prompt, or a template such as ``"Translate {text} to {lang}."`` whose fields the
            inputs fill (sent as the human message; ``{{``/``}}`` are literal braces; a missing input is a
            `UserError` naming it).
        output: a pydantic model class; ``invoke`` then returns a validated instance of it.
        vector_store: a LangChain `VectorStore`; each call retrieves ``k`` documents as context.
        k: how many documents to retrieve.
        retries: extra model calls when the reply does not validate against ``output``.
        tracer_provider: an OpenTelemetry ``TracerProvider``: each call's model calls emit GenAI ``chat`` spans
            to it (see `ai_utils.otel`; extra ``otel``).
    """

    @overload
    def __init__(
        self: Chain[str],
        *,
        llm: BaseChatModel | None = None,
        prompt: str = "",
        output: None = None,
        vector_store: VectorStore | None = None,
        k: int = 4,
        retries: int = 2,
        tracer_provider: TracerProvider | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Chain[M],
        *,
        llm: BaseChatModel | None = None,
        prompt: str = "",
        output: type[M],
        vector_store: VectorStore | None = None,
        k: int = 4,
        retries: int = 2,
        tracer_provider: TracerProvider | None = None,
    ) -> None: ...

    def __init__(
        self,
        *,
        llm: BaseChatModel | None = None,
        prompt: str = "",
        output: type[BaseModel] | None = None,
        vector_store: VectorStore | None = None,
        k: int = 4,
        retries: int = 2,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        if output is not None:
            check_schema(output, argument="Chain(output=...)")
        if not isinstance(prompt, str):
            raise UserError(f"Chain(prompt=...) must be a str, got {prompt!r}.")
        template_fields(prompt)  # a malformed template fails here, not on the first call
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UserError(f"Chain(k=...) must be an int >= 1, got {k!r}. Pass e.g. `k=4`.")
        self.retries = check_retries(retries)
        if llm is None:
            from ai_utils.llm import get_llm

            llm = get_llm()
        self.llm: BaseChatModel = llm
        self.prompt = prompt
        self.output = output
        self._call: StructuredCall[BaseModel] | None = None if output is None else structured_call(llm, output)
        self.vector_store = vector_store
        self.k = k
        self._callbacks: list[Any] = []
        if tracer_provider is not None:
            from ai_utils.otel._instrument import provider_callbacks

            self._callbacks = provider_callbacks(tracer_provider)

    def __repr__(self) -> str:
        output = None if self.output is None else self.output.__name__
        return f"Chain(llm={type(self.llm).__name__}, output={output}, k={self.k}, retries={self.retries})"

    def _config(self, config: RunnableConfig | None) -> RunnableConfig | None:
        """``config`` with the chain's own callbacks (its ``tracer_provider``'s handler) added."""
        if config is not None:
            check_run_config(config, "Chain")
        if not self._callbacks:
            return config
        return merge_configs(config, {"callbacks": self._callbacks})

    def _input_type(self) -> Any:
        return ChainInput

    def _output_type(self) -> Any:
        return self.output or str

    def _messages(self, inputs: Any, documents: list[Document] | None) -> list[BaseMessage]:
        messages = as_messages(inputs)
        if messages is None:
            return build_messages(self.prompt, inputs, documents=documents, output=self.output)
        return conversation_messages(self.prompt, messages, documents=documents, output=self.output)

    def _query(self, inputs: Any) -> str | None:
        """The retrieval query (``None`` without a vector store); checks the inputs first."""
        messages = as_messages(inputs)
        if messages is None:
            check_inputs(inputs)
        if self.vector_store is None:
            return None
        return retrieval_query(inputs) if messages is None else message_query(messages)

    def _documents(self, inputs: Any) -> list[Document] | None:
        query = self._query(inputs)
        if query is None or self.vector_store is None:
            return None
        return self.vector_store.similarity_search(query, k=self.k)

    async def _adocuments(self, inputs: Any) -> list[Document] | None:
        query = self._query(inputs)
        if query is None or self.vector_store is None:
            return None
        return await self.vector_store.asimilarity_search(query, k=self.k)

    def invoke(  # type: ignore[override]  # `inputs`, not Runnable's `input`: the name callers have used
        self, inputs: ChainInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> OutputT:
        """Run the chain once.

        Args:
            inputs: named inputs, rendered as ``key: value`` lines (``question`` drives retrieval); or a prompt
                value or messages (``prompt_template | chain``), sent after the chain's system message.
            config: a LangChain run config (callbacks, tags, metadata, run_name) for this chain run.
            **kwargs: none are taken (a `Runnable` may pass its bound keywords; any is a `UserError`).

        Returns:
            A validated ``output`` instance, or the reply text when the chain has no ``output``.

        Raises:
            UserError: ``inputs`` is not a non-empty mapping or a message input.
            ModelOutputError: the reply did not validate against ``output`` after ``retries`` extra attempts.
        """
        warn_sync_in_loop("Chain", "invoke")
        _no_options("invoke", kwargs)
        return self._call_with_config(self._run, inputs, self._config(config), run_type="chain")

    def _run(self, inputs: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig) -> OutputT:
        messages = self._messages(inputs, self._documents(inputs))
        if self._call is not None:
            return cast(
                OutputT, invoke_structured(self._call, messages, self._call.schema, retries=self.retries, config=config)
            )
        return cast(OutputT, message_text(self.llm.invoke(messages, config)))

    async def ainvoke(  # type: ignore[override]  # see invoke
        self, inputs: ChainInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> OutputT:
        """Async twin of `invoke`."""
        _no_options("ainvoke", kwargs)
        return await self._acall_with_config(self._arun, inputs, self._config(config), run_type="chain")

    async def _arun(self, inputs: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig) -> OutputT:
        messages = self._messages(inputs, await self._adocuments(inputs))
        if self._call is not None:
            result = await ainvoke_structured(
                self._call, messages, self._call.schema, retries=self.retries, config=config
            )
            return cast(OutputT, result)
        return cast(OutputT, message_text(await self.llm.ainvoke(messages, config)))

    def stream(  # type: ignore[override]  # yields text chunks whatever ``output`` is
        self, inputs: ChainInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[str]:
        """Yield the reply text as the model streams it.

        With ``output`` the chain asks for JSON, so the chunks are the raw JSON text (not validated;
        use `invoke` for a validated instance).

        Args:
            inputs: as for `invoke`.
            config: as for `invoke`.
            **kwargs: as for `invoke`.

        Yields:
            Non-empty text chunks.
        """
        _no_options("stream", kwargs)
        # Runnable types the helper's chunks as answers (OutputT); a chain streams text whatever ``output`` is.
        chunks = cast(Any, self._text_chunks)
        text: Any = self._transform_stream_with_config(iter([inputs]), chunks, self._config(config), "chain")
        return cast("Iterator[str]", text)

    def _text_chunks(
        self, inputs: Iterator[Any], run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> Iterator[str]:
        warn_sync_in_loop("Chain", "stream", stacklevel=6)  # where the run happens (a worker thread is fine)
        for given in inputs:
            messages = self._messages(given, self._documents(given))
            for chunk in self.llm.stream(messages, config):
                if text := message_text(chunk):
                    yield text

    def astream(  # type: ignore[override]  # see stream
        self, inputs: ChainInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[str]:
        """Async twin of `stream`."""
        _no_options("astream", kwargs)
        chunks = cast(Any, self._atext_chunks)
        text: Any = self._atransform_stream_with_config(_once(inputs), chunks, self._config(config), "chain")
        return cast("AsyncIterator[str]", text)

    async def _atext_chunks(
        self, inputs: AsyncIterator[Any], run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> AsyncIterator[str]:
        async for given in inputs:
            messages = self._messages(given, await self._adocuments(given))
            async for chunk in self.llm.astream(messages, config):
                if text := message_text(chunk):
                    yield text

    def _store(self) -> VectorStore:
        if self.vector_store is None:
            raise UserError("This Chain has no vector store to add context to. Pass `Chain(vector_store=...)`.")
        return self.vector_store

    def add_context(self, data: Any) -> list[str]:
        """Add documents to the chain's vector store.

        Args:
            data: a string, `Document` or ``{page_content, metadata}`` mapping, or a list of them.

        Returns:
            The ids the store gave the new documents.

        Raises:
            UserError: the chain has no ``vector_store`` or an item has an unsupported type.
        """
        store = self._store()
        return store.add_documents(turn_to_docs(data))

    async def aadd_context(self, data: Any) -> list[str]:
        """Async twin of `add_context`."""
        store = self._store()
        return await store.aadd_documents(turn_to_docs(data))


def _no_options(method: str, kwargs: Mapping[str, Any]) -> None:
    reject_unknown(kwargs, owner=f"Chain.{method}", known=(), hint=" A Chain takes its inputs and a `config` only.")


async def _once(value: Any) -> AsyncIterator[Any]:
    yield value
