"""A direct HTTP transport for `classify(..., llm=...)` on plain OpenAI-compatible chat models.

Why it exists: against a zero-latency local server, one request through ``ChatOpenAI`` (LangChain's run
machinery, the OpenAI SDK's request building and pydantic reply model, a thread hop to build the result)
measured ~2.5x a raw httpx POST of the same body, while everything classify itself adds was ~4%
(``benchmarks/bench_modalities.py``). classify's requests are tiny (one token out), so against a local
model that layer was most of its latency.

What it keeps from the model, so both paths behave alike:

- the request body is the model's own (``_get_request_payload``: model, temperature, ``model_kwargs``,
  reasoning options, ``extra_body`` such as ``data_safe``'s OpenRouter ``provider``, merged top-level as the
  SDK does);
- URL, key, organization/project, default headers and query and the timeout are read from the model's
  resolved OpenAI client, so the SDK's environment defaults apply (not its ``X-Stainless-*`` / ``User-Agent``
  headers, which describe the SDK as the sender);
- the reply becomes the ``AIMessage`` through the model's own ``_create_chat_result``, or, when no callback
  listens (so the message stays inside classify), the same message built directly for the usual one-choice
  text reply (`_plain_reply`);
- LangChain callbacks (the gateway's audit handler, LangSmith tracing, the enclosing run's handlers) get
  ``on_chat_model_start`` / ``on_llm_end`` / ``on_llm_error`` as through the model; they cost something only
  when configured;
- a failed attempt (non-2xx status, connection error, timeout) is sent again by the model itself
  (``_agenerate`` / ``_generate``), so retries, backoff and the exceptions raised are exactly the generic
  path's. A failure therefore costs one extra request (and a timed-out attempt its timeout once more).

Anything else takes the generic path (``None`` from `abatch` / `batch`): other classes and subclasses
(Azure, user subclasses that may override the transport), custom HTTP clients, proxies, rate limiters,
caches, streaming, the Responses API, callable keys, workload identity, non-numeric timeouts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import httpx
from langchain_core.caches import BaseCache
from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForLLMRun,
    CallbackManager,
    CallbackManagerForLLMRun,
)
from langchain_core.globals import get_llm_cache
from langchain_core.messages import LC_ID_PREFIX, AIMessage, BaseMessage
from langchain_core.outputs import ChatResult, Generation, LLMResult
from langchain_core.runnables.config import RunnableConfig, ensure_config, get_executor_for_config
from pydantic import SecretStr

from ai_utils._compat.langchain_core import (
    agenerate,
    generate,
    invocation_params,
    ls_params,
    response_metadata,
    serialized,
)
from ai_utils._compat.langchain_openai import chat_result, request_payload, usage_metadata, uses_responses_api
from ai_utils._loop_resources import on_loop_close
from ai_utils.exceptions import ModelOutputError
from ai_utils.jev.client import shared_http_client, ssl_context

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_openai.chat_models.base import BaseChatOpenAI

try:
    import orjson
except ImportError:  # pragma: no cover - orjson comes with langsmith
    orjson = None  # type: ignore[assignment]

__all__ = ["abatch", "batch"]

# Payload keys the SDK turns into something other than JSON body fields.
_SDK_ONLY_KEYS: Final = frozenset({"extra_headers", "extra_query", "timeout", "response_format"})

_routes: weakref.WeakKeyDictionary[Any, _Route | None] = weakref.WeakKeyDictionary()
_plain_classes: tuple[type, ...] | None = None
"""The classes `_plain` accepts, imported on first use."""
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True, slots=True)
class _Route:
    """Where and how the model's SDK would send a Chat Completions request."""

    url: str
    headers: dict[str, str] = dataclasses.field(repr=False)  # holds the key
    params: dict[str, str] | None
    timeout: float | None


def _plain(llm: BaseChatModel) -> BaseChatOpenAI | None:
    """``llm`` when it is exactly `ChatOpenAI` or one of ``get_llm``'s OpenAI-compatible classes.

    Not subclasses in general: they may change how requests are sent. ``get_llm("local")``'s class only
    renames connection errors in ``_agenerate``/``_generate``, which failed attempts go through.
    """
    global _plain_classes
    if _plain_classes is None:
        if "langchain_openai" not in sys.modules:  # a ChatOpenAI exists only once its module is imported; stay light
            return None
        from langchain_openai import ChatOpenAI

        from ai_utils.llm._factory import _LocalChatModel
        from ai_utils.llm._openai_compat import ChatOpenAICompatible

        _plain_classes = (ChatOpenAI, ChatOpenAICompatible, _LocalChatModel)
    return llm if type(llm) in _plain_classes else None  # type: ignore[return-value]


def _route(llm: BaseChatOpenAI) -> _Route | None:
    """The plain request ``llm`` makes, or None when only the model itself can make it faithfully."""
    if llm.http_client is not None or llm.http_async_client is not None or llm.openai_proxy:
        return None
    if llm.rate_limiter is not None or llm.streaming or llm.output_version not in (None, "v0"):
        return None
    if llm.cache is not False and (isinstance(llm.cache, BaseCache) or get_llm_cache() is not None):
        return None
    if not isinstance(llm.openai_api_key, SecretStr):  # a key provider callable is refreshed by the SDK
        return None
    sdk = llm.root_async_client
    if sdk is None:
        return None
    if sdk not in _routes:
        _routes[sdk] = _sdk_route(sdk)
    return _routes[sdk]


def _sdk_route(sdk: Any) -> _Route | None:
    """URL, headers, query and timeout of the SDK client; fixed when the client is built, so kept per client."""
    if getattr(sdk, "workload_identity", None) is not None:
        return None
    timeout = sdk.timeout
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
        return None
    # The SDK merges the auth header first, then its defaults (which win), and drops its Omit markers. Its
    # ``X-Stainless-*`` and ``User-Agent`` headers describe the SDK itself, which is not the sender here.
    headers = {
        name: value
        for name, value in {**sdk.auth_headers, **sdk.default_headers}.items()
        if isinstance(value, str) and name != "User-Agent" and not name.startswith("X-Stainless-")
    }
    query = sdk.default_query or {}
    if not all(isinstance(value, str) for value in query.values()):
        return None
    return _Route(f"{sdk.base_url}chat/completions", headers, dict(query) or None, timeout)


def _payloads(
    llm: BaseChatOpenAI, inputs: Sequence[list[BaseMessage]], kwargs: Mapping[str, Any]
) -> list[bytes] | None:
    """The JSON bodies the model's SDK would send, one per message list.

    The model builds the first body itself. classify's requests differ only in their texts (same message
    classes, same options), so when the model sent the first one's messages as plain ``{role, content}`` the
    others reuse its body with their own texts, instead of walking the model's request building per question.
    """
    first = request_payload(llm, inputs[0], kwargs)
    if first.get("stream") or _SDK_ONLY_KEYS & first.keys() or uses_responses_api(llm, first):
        return None
    first.update(first.pop("extra_body", None) or {})
    wire = first["messages"]
    shape = [type(message) for message in inputs[0]]
    plain = len(wire) == len(shape) and all(
        sent == {"role": sent.get("role"), "content": message.content}
        for sent, message in zip(wire, inputs[0], strict=False)
    )
    payloads = [first]
    for messages in inputs[1:]:
        if plain and [type(m) for m in messages] == shape and all(isinstance(m.content, str) for m in messages):
            texts = [{**sent, "content": message.content} for sent, message in zip(wire, messages, strict=True)]
            payloads.append({**first, "messages": texts})
        else:
            payload = request_payload(llm, messages, kwargs)
            payload.update(payload.pop("extra_body", None) or {})
            payloads.append(payload)
    if orjson is not None:
        return [orjson.dumps(payload) for payload in payloads]
    return [json.dumps(payload, ensure_ascii=False).encode() for payload in payloads]  # pragma: no cover


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """One classify call on the fast path: the model, where to send, the bodies, and who listens."""

    llm: BaseChatOpenAI
    route: _Route
    bodies: list[bytes]
    kwargs: Mapping[str, Any]
    listeners: _Listeners | None


@dataclasses.dataclass(frozen=True, slots=True)
class _Listeners:
    """What `BaseChatModel.agenerate` hands its callback manager; built only when a handler is configured."""

    manager: Any  # CallbackManager | AsyncCallbackManager
    serialized: dict[str, Any]
    params: dict[str, Any]
    run_name: str | None

    def start_kwargs(self) -> dict[str, Any]:
        return {
            "invocation_params": self.params,
            "options": {"stop": None},
            "name": self.run_name,
            "batch_size": 1,
        }


def _plan(
    model: BaseChatModel, inputs: Sequence[list[BaseMessage]], kwargs: Mapping[str, Any], *, asynchronous: bool
) -> _Plan | None:
    llm = _plain(model)
    route = None if llm is None else _route(llm)
    if llm is None or route is None:
        return None
    bodies = _payloads(llm, inputs, kwargs)
    if bodies is None:
        return None
    # The enclosing run's config (an agent node, a tool): its handlers are inherited as through the model.
    config = ensure_config()
    return _Plan(llm, route, bodies, kwargs, _listeners(llm, kwargs, config, asynchronous=asynchronous))


def _listeners(
    llm: BaseChatOpenAI, kwargs: Mapping[str, Any], config: RunnableConfig, *, asynchronous: bool
) -> _Listeners | None:
    """The callback manager the model would configure, or None when nobody listens (no handler, no tracer).

    Streaming listeners (``astream_events``) get start and end events but no tokens, as from a model with
    ``disable_streaming=True``: the answer is one token, read whole.
    """
    configure = AsyncCallbackManager.configure if asynchronous else CallbackManager.configure
    manager = configure(
        config.get("callbacks"),
        llm.callbacks,
        llm.verbose,
        config.get("tags"),
        llm.tags,
        config.get("metadata"),
        llm.metadata,
    )
    if not manager.handlers:
        return None
    # The model's LangSmith parameters (ls_provider, ls_model_name, ...) join the inherited metadata, as in
    # `BaseChatModel.agenerate`; computed only now that someone listens.
    manager.add_metadata(ls_params(llm, kwargs))
    params = invocation_params(llm, kwargs)
    return _Listeners(manager, serialized(llm), params, config.get("run_name"))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"the non-finite number {name}")


def _payload(llm: BaseChatOpenAI, content: bytes) -> Any:
    """The reply body, parsed as strict JSON.

    A body that is not strict JSON (``NaN``/``Infinity``, garbage) is a `ModelOutputError`, as the generic path
    reports non-finite logprobs, never a raw decode error.
    """
    try:
        payload = orjson.loads(content) if orjson is not None else json.loads(content, parse_constant=_reject_constant)
    except ValueError:  # orjson.JSONDecodeError and json.JSONDecodeError are ValueErrors
        try:
            json.loads(content, parse_constant=_reject_constant)
        except ValueError as strict:
            error = strict  # the reason in words: which constant, or where the JSON breaks
        name = getattr(llm, "model_name", None) or type(llm).__name__
        raise ModelOutputError(
            f"The chat model {name!r} sent a reply that is not valid JSON ({error}). The server is broken or "
            "hostile; try another server or drop llm=.",
            errors=str(error),
            attempts=1,
            output=content[:200].decode("utf-8", "replace"),
        ) from None
    return payload


# The keys of a reply message `_plain_reply` reads like the model's parser does; with any other key (reasoning
# text, a name, an id, ...) the model's own parser builds the reply. The last four must be empty.
_PLAIN_MESSAGE_KEYS: Final = frozenset(
    {"role", "content", "annotations", "refusal", "tool_calls", "function_call", "audio"}
)
_EMPTY_MESSAGE_KEYS: Final = ("refusal", "tool_calls", "function_call", "audio")


def _plain_reply(llm: BaseChatOpenAI, payload: Any) -> AIMessage | None:
    """``_reply(chat_result(llm, payload), None)`` for the usual reply (one plain assistant text), built directly.

    Used when nobody listens: then the message never leaves classify, and the model's parser (its `ChatResult`,
    `ChatGeneration` and message conversion) is most of what reading a one-token answer costs. The message is
    the one the model's parser gives (``tests/jev/test_classify_llm_http.py`` compares them); any other reply
    (an error, several choices, tool calls, reasoning text, ...) is None and goes through the model's parser.
    """
    if type(payload) is not dict or payload.get("error"):
        return None
    choices = payload.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choice := choices[0]) is not dict:
        return None
    message = choice.get("message")
    if type(message) is not dict or message.get("role") != "assistant" or not _PLAIN_MESSAGE_KEYS.issuperset(message):
        return None
    if any(message.get(key) for key in _EMPTY_MESSAGE_KEYS):
        return None
    text = message.get("content") or ""
    if type(text) is not str:
        return None
    usage = payload.get("usage")
    tier = payload.get("service_tier")
    label = getattr(llm, "provider_label", None)
    metadata: dict[str, Any] = {
        "token_usage": usage,
        "model_provider": "openai" if label is None else label,
        "model_name": payload.get("model", llm.model_name),
        "system_fingerprint": payload.get("system_fingerprint", ""),
    }
    if "id" in payload:
        metadata["id"] = payload["id"]
    if tier:
        metadata["service_tier"] = tier
    metadata["finish_reason"] = choice.get("finish_reason")
    if "logprobs" in choice:
        metadata["logprobs"] = choice["logprobs"]
    if usage:
        if type(usage) is not dict:
            return None
        return AIMessage(text, response_metadata=metadata, usage_metadata=usage_metadata(usage, tier))
    return AIMessage(text, response_metadata=metadata)


def _reply(result: ChatResult, run_id: Any) -> AIMessage:
    """What `BaseChatModel` does after ``_generate``: message id, then generation info and llm output as metadata."""
    for index, generation in enumerate(result.generations):
        if run_id is not None and generation.message.id is None:
            generation.message.id = f"{LC_ID_PREFIX}-{run_id}-{index}"
        generation.message.response_metadata = response_metadata(generation)
    message = result.generations[0].message
    if len(result.generations) == 1 and result.llm_output is not None:
        message.response_metadata = {**result.llm_output, **message.response_metadata}
    if not isinstance(message, AIMessage):  # pragma: no cover - ChatOpenAI always answers with an AIMessage
        raise TypeError(f"expected an AIMessage, got {type(message).__name__}")
    return message


def _llm_result(result: ChatResult) -> LLMResult:
    generations: list[Generation] = list(result.generations)
    return LLMResult(generations=[generations], llm_output=result.llm_output)


def _async_client() -> httpx.AsyncClient:
    """One pooled client per event loop (its keep-alive connections belong to that loop), closed with it."""
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        client = _async_clients[loop] = httpx.AsyncClient(verify=ssl_context())
        on_loop_close(client.aclose)
    return client


def _post_options(route: _Route, body: bytes) -> dict[str, Any]:
    """The keyword arguments of one ``client.post(route.url, ...)``, sync or async."""
    return {
        "content": body,
        "headers": route.headers,
        "params": route.params,
        "timeout": route.timeout,
        "follow_redirects": True,
    }


def _body(response: httpx.Response) -> bytes | None:
    return response.content if response.is_success else None


async def _apost(route: _Route, body: bytes) -> bytes | None:
    try:
        return _body(await _async_client().post(route.url, **_post_options(route, body)))
    except httpx.TransportError:
        return None


def _post(route: _Route, body: bytes) -> bytes | None:
    try:
        return _body(shared_http_client().post(route.url, **_post_options(route, body)))
    except httpx.TransportError:
        return None


async def abatch(
    model: BaseChatModel, inputs: Sequence[list[BaseMessage]], kwargs: Mapping[str, Any]
) -> list[AIMessage] | None:
    """One request per message list, concurrently; None when ``model`` must take the generic path (nothing sent)."""
    plan = _plan(model, inputs, kwargs, asynchronous=True)
    if plan is None:
        return None
    return list(
        await asyncio.gather(*(_aone(plan, messages, body) for messages, body in zip(inputs, plan.bodies, strict=True)))
    )


async def _aone(plan: _Plan, messages: list[BaseMessage], body: bytes) -> AIMessage:
    run: AsyncCallbackManagerForLLMRun | None = None
    if plan.listeners is not None:
        (run,) = await plan.listeners.manager.on_chat_model_start(
            plan.listeners.serialized, [messages], **plan.listeners.start_kwargs()
        )
    try:
        content = await _apost(plan.route, body)
        if content is not None:
            payload = _payload(plan.llm, content)
            if run is None and (plain := _plain_reply(plan.llm, payload)) is not None:
                return plain
            result = chat_result(plan.llm, payload)
        else:  # the model sends it again: its retries, its errors
            result = await agenerate(plan.llm, messages, run, plan.kwargs)
        reply = _reply(result, None if run is None else run.run_id)
    except BaseException as exc:
        if run is not None:
            await run.on_llm_error(exc)
        raise
    if run is not None:
        await run.on_llm_end(_llm_result(result))
    return reply


def batch(
    model: BaseChatModel, inputs: Sequence[list[BaseMessage]], kwargs: Mapping[str, Any]
) -> list[AIMessage] | None:
    """Sync `abatch`: the requests run in parallel threads, as ``model.batch`` runs them."""
    plan = _plan(model, inputs, kwargs, asynchronous=False)
    if plan is None:
        return None
    with get_executor_for_config(None) as executor:
        return list(executor.map(lambda messages, body: _one(plan, messages, body), inputs, plan.bodies))


def _one(plan: _Plan, messages: list[BaseMessage], body: bytes) -> AIMessage:
    run: CallbackManagerForLLMRun | None = None
    if plan.listeners is not None:
        (run,) = plan.listeners.manager.on_chat_model_start(
            plan.listeners.serialized, [messages], **plan.listeners.start_kwargs()
        )
    try:
        content = _post(plan.route, body)
        if content is not None:
            payload = _payload(plan.llm, content)
            if run is None and (plain := _plain_reply(plan.llm, payload)) is not None:
                return plain
            result = chat_result(plan.llm, payload)
        else:  # the model sends it again: its retries, its errors
            result = generate(plan.llm, messages, run, plan.kwargs)
        reply = _reply(result, None if run is None else run.run_id)
    except BaseException as exc:
        if run is not None:
            run.on_llm_error(exc)
        raise
    if run is not None:
        run.on_llm_end(_llm_result(result))
    return reply
