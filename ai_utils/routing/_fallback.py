"""`get_llm(profile=..., profiles=...)`: one chat model over a profile's concrete models, tried in order.

The trying in order is LangChain's own ``Runnable.with_fallbacks(..., exceptions_to_handle=...)``: it hands
over to the next model only for the listed exception types, which here are the retriable provider errors
(HTTP 429 and 5xx, timeouts, connection failures) and never another 4xx: a 400 or 401 would fail the same
way on every model, so it is raised at once. ``ModelFallbackMiddleware`` does not fit: it falls back on any
exception (a 400 too) and only inside an agent, while ``get_llm`` must return a model usable anywhere.

`FallbackChatModel` is the thin `BaseChatModel` shell around that ``RunnableWithFallbacks``: ``create_agent``,
``create_deep_agent`` and ``Gateway`` accept only chat models. Its ``invoke``/``stream`` (and async twins)
go straight to the fallbacks runnable, so each attempt is one ordinary model run: the gateway audit writes
a ``failed`` row for the model that failed and a ``succeeded`` row naming the model that answered, and the
reply's ``response_metadata["model_name"]`` is what that model's server reported. ``bind_tools`` and
``with_structured_output`` are applied to every model by ``RunnableWithFallbacks`` itself.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.fallbacks import RunnableWithFallbacks
from pydantic import PrivateAttr

from ai_utils.exceptions import UserError
from ai_utils.llm._chat_model import MessageChatModel
from ai_utils.llm._request import RequestOptions, bind_request
from ai_utils.routing.profiles import ModelProfiles, as_profiles

__all__ = ["FallbackChatModel", "profile_llm", "retriable_errors"]

# Providers whose SDK retries on its own; inside a fallback chain their retries default to 0 so a failing model
# hands over at once (pass max_retries=N to retry each model first).
_SDK_RETRIES = ("openrouter", "openai", "anthropic", "gemini", "deepseek", "local", "groq")


def retriable_errors() -> tuple[type[BaseException], ...]:
    """The exception types a profile falls back on: 429, 5xx (Anthropic's 529 too), timeouts and connection errors.

    LangChain's provider-neutral retryable errors (``ModelRateLimitError``, ``ModelAPIError``,
    ``ModelConnectionError``, ``ModelTimeoutError``), which langchain-openai, -anthropic and -google-genai raise;
    the OpenAI SDK's own (also used for OpenRouter, DeepSeek and local servers): ``RateLimitError`` (429),
    ``InternalServerError`` (every status >= 500), ``APIConnectionError`` (with ``APITimeoutError``); the groq,
    Anthropic and google-genai SDK twins when loaded; and the builtin/httpx timeout and connection errors other
    clients raise. Never a 4xx other than 429: it would fail the same way on every model.
    """
    import httpx
    import openai
    from langchain_core.exceptions import ModelAPIError, ModelConnectionError, ModelRateLimitError, ModelTimeoutError

    errors: list[type[BaseException]] = [
        ModelRateLimitError,
        ModelAPIError,
        ModelConnectionError,
        ModelTimeoutError,
        openai.RateLimitError,
        openai.InternalServerError,
        openai.APIConnectionError,
        httpx.TimeoutException,
        httpx.NetworkError,
        TimeoutError,
        ConnectionError,
    ]
    # A model of these providers exists only if its SDK was imported.
    for sdk in ("groq", "anthropic"):
        module = sys.modules.get(sdk)
        if module is not None:
            errors += [module.RateLimitError, module.InternalServerError, module.APIConnectionError]
    genai_errors = sys.modules.get("google.genai.errors")
    if genai_errors is not None:
        errors.append(genai_errors.ServerError)  # every 5xx; its 429 arrives as LangChain's ModelRateLimitError
    return tuple(errors)


class FallbackChatModel(MessageChatModel):
    """A chat model that tries ``models`` in order, moving on only for retriable provider errors.

    Built by ``get_llm(profile=..., profiles=...)``; see the module docstring.

    Attributes:
        models: the concrete chat models, primary first.
        model_ids: their model ids, in the same order.
        profile_name: the profile they came from.
        model_name: the primary model id.
    """

    models: list[BaseChatModel]
    model_ids: list[str]
    profile_name: str | None = None
    model_name: str = ""

    _chain: RunnableWithFallbacks[Any, Any] = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        """Build the fallbacks runnable once."""
        if len(self.models) < 2 or len(self.models) != len(self.model_ids):
            raise UserError("FallbackChatModel needs at least two models and one id per model.")
        self.model_name = self.model_name or self.model_ids[0]
        if self.profile is None:
            self.profile = self.models[0].profile
        self._chain = self.models[0].with_fallbacks(self.models[1:], exceptions_to_handle=retriable_errors())

    @property
    def _llm_type(self) -> str:
        return "ai_utils-fallback"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"profile": self.profile_name, "models": list(self.model_ids)}

    @property
    def fallbacks(self) -> RunnableWithFallbacks[Any, Any]:
        """The LangChain ``RunnableWithFallbacks`` doing the work."""
        return self._chain

    # -- the runnable surface goes to the fallbacks runnable (one model run per attempt) ---------------------

    def _own(self, runnable: Runnable[Any, Any]) -> Runnable[Any, Any]:
        # Callbacks, tags and metadata set on this model (``llm.callbacks = [handler]``) reach every attempt.
        if not (self.callbacks or self.tags or self.metadata):
            return runnable
        config: RunnableConfig = {}
        if self.callbacks:
            config["callbacks"] = self.callbacks
        if self.tags:
            config["tags"] = list(self.tags)
        if self.metadata:
            config["metadata"] = dict(self.metadata)
        return runnable.with_config(config)

    @staticmethod
    def _kwargs(stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**kwargs, "stop": stop} if stop is not None else kwargs

    def invoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        """Call the models in order until one answers."""
        result: AIMessage = self._own(self._chain).invoke(input, config, **self._kwargs(stop, kwargs))
        return result

    async def ainvoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        """Async twin of `invoke`."""
        result: AIMessage = await self._own(self._chain).ainvoke(input, config, **self._kwargs(stop, kwargs))
        return result

    def stream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[AIMessageChunk]:
        """Stream from the first model that starts answering."""
        yield from self._own(self._chain).stream(input, config, **self._kwargs(stop, kwargs))

    async def astream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[AIMessageChunk]:
        """Async twin of `stream`."""
        async for chunk in self._own(self._chain).astream(input, config, **self._kwargs(stop, kwargs)):
            yield chunk

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind ``tools`` to every model (LangChain's ``RunnableWithFallbacks`` does it per model)."""
        bound: Runnable[LanguageModelInput, AIMessage] = self._own(self._chain.bind_tools(tools, **kwargs))
        return bound

    def bind_request(
        self, *, tools: Sequence[Any] = (), options: RequestOptions
    ) -> tuple[Runnable[LanguageModelInput, AIMessage], tuple[str, ...]]:
        """Bind tools and per-request options to each model in its own provider's terms, with the same fallbacks.

        Used by `Gateway.complete` (via ``ai_utils.llm._request.bind_request``): one model's options (Gemini's
        ``max_output_tokens``, Anthropic's ``betas``) must not reach another provider's model.

        Returns:
            The runnable and the option names any of the models drops.
        """
        if not tools and not options:
            return self, ()  # nothing to bind: this model's own fallbacks, built once (no chain per call)
        bound = [bind_request(model, tools=tools, options=options) for model in self.models]
        dropped = tuple(dict.fromkeys(name for _, names in bound for name in names))
        first, *rest = [runnable for runnable, _ in bound]
        chain: Runnable[LanguageModelInput, AIMessage] = self._own(
            first.with_fallbacks(rest, exceptions_to_handle=retriable_errors())
        )
        return chain, dropped

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        """Structured output from every model, with the same fallbacks."""
        structured: Runnable[LanguageModelInput, Any] = self._own(self._chain.with_structured_output(schema, **kwargs))
        return structured

    # Only `generate()` (the legacy batch API) lands here: invoke/stream above never do. Its attempts are not
    # nested under the outer run in traces.
    def _message(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> AIMessage:
        message: AIMessage = self._chain.invoke(messages, **self._kwargs(stop, kwargs))
        return message

    async def _amessage(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> AIMessage:
        message: AIMessage = await self._chain.ainvoke(messages, **self._kwargs(stop, kwargs))
        return message


def _provider_and_model(provider: str, model_id: str, providers: Sequence[str]) -> tuple[str, str, bool]:
    """Split ``"local:llama3.2:3b"`` into ("local", "llama3.2:3b", True).

    An id without a known provider prefix belongs to the call's provider (``"openai/gpt-4o-mini"``).
    """
    prefix, sep, rest = model_id.partition(":")
    if sep and prefix in providers and rest:
        return prefix, rest, prefix != provider
    return provider, model_id, False


def profile_llm(
    build: Any,
    provider: str,
    profile: str | Mapping[str, Any],
    profiles: ModelProfiles | Mapping[str, Any] | None,
    *,
    providers: Sequence[str],
    options: dict[str, Any],
) -> BaseChatModel:
    """The model for ``get_llm(profile=..., profiles=...)``.

    Args:
        build: ``get_llm`` itself, called once per concrete model.
        provider: the call's provider.
        profile: the profile name (or ``{"profile": name}``).
        profiles: the profiles.
        providers: the known provider names (for ``"provider:model"`` ids).
        options: the other ``get_llm`` keyword arguments; ``api_key``/``base_url`` go only to models of
            the call's provider.

    Returns:
        The one model, or a `FallbackChatModel` over several.

    Raises:
        UserError: ``profile`` without ``profiles``.
        ModelProfileError: the profile cannot be resolved.
    """
    if profiles is None:
        raise UserError(
            f"get_llm(profile={profile!r}) needs the profiles to resolve it: pass profiles=ModelProfiles({{...}})."
        )
    table = as_profiles(profiles)
    name = profile if isinstance(profile, str) else str(profile.get("profile"))
    ids = table.resolve({"profile": name})
    models: list[BaseChatModel] = []
    for model_id in ids:
        model_provider, model, foreign = _provider_and_model(provider, model_id, providers)
        kwargs = dict(options)
        if foreign:
            kwargs.pop("api_key", None)
            kwargs.pop("base_url", None)
        if len(ids) > 1 and model_provider in _SDK_RETRIES:
            kwargs.setdefault("max_retries", 0)
        models.append(build(model_provider, model, **kwargs))
    if len(models) == 1:
        return models[0]
    return FallbackChatModel(models=models, model_ids=ids, profile_name=name)
