"""`get_llm`: one call from a provider name to a ready LangChain chat model."""

from __future__ import annotations

import difflib
import os
import shutil
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.outputs import ChatGenerationChunk, ChatResult

from ai_utils.exceptions import ProviderError, UserError
from ai_utils.llm._claude_cli import ChatClaudeCLI
from ai_utils.llm._cli import CLIChatModel, Reasoning
from ai_utils.llm._codex_cli import ChatCodexCLI
from ai_utils.llm._free import free_model
from ai_utils.llm._openai_compat import ChatOpenAICompatible

if TYPE_CHECKING:
    from ai_utils.routing.profiles import ModelProfiles

__all__ = ["DEFAULT_MODELS", "PROVIDERS", "get_llm"]

PROVIDERS: Final = ("openrouter", "openai", "groq", "local", "claude-cli", "codex-cli", "fake")

DEFAULT_MODELS: Final[Mapping[str, str]] = {
    "openrouter": "openai/gpt-5.6-luna",
    "openai": "gpt-5.6-luna",
    "groq": "llama-3.3-70b-versatile",
    "local": "llama3.2:3b",
    "claude-cli": "sonnet",
    "codex-cli": "gpt-5.5",
    "fake": "fake-chat-model",
}

# provider -> (default base URL, env override)
_BASE_URLS: Final[Mapping[str, tuple[str, str]]] = {
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_BASE_URL"),
    "openai": ("https://api.openai.com/v1", "OPENAI_BASE_URL"),
    "groq": ("https://api.groq.com", "GROQ_BASE_URL"),
    "local": ("http://localhost:11434/v1", "LOCAL_LLM_BASE_URL"),
}

# provider -> env variables holding its key, first found wins
_KEY_ENV: Final[Mapping[str, tuple[str, ...]]] = {
    "openrouter": ("OPENROUTER_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "groq": ("CHATGROQ_API_KEY", "GROQ_API_KEY"),
}

# Providers where data_safe holds: OpenRouter enforces it per request, local/fake never leave the machine.
_DATA_SAFE_OK: Final = ("openrouter", "local", "fake")

# A local OpenAI-compatible server (Ollama, vLLM, llama.cpp) needs no key, but the OpenAI SDK insists on one.
_LOCAL_DUMMY_KEY: Final = "not-needed"


class _DefaultProvider(str):
    """The default ``provider`` value; its identity tells "not given" from an explicit "openrouter"."""

    __slots__ = ()


_DEFAULT_PROVIDER: Final = _DefaultProvider("openrouter")


def _resolve_provider(provider: str) -> str:
    if provider is _DEFAULT_PROVIDER:
        provider = os.environ.get("AI_UTILS_PROVIDER") or str(provider)
    if provider not in PROVIDERS:
        known = ", ".join(repr(p) for p in PROVIDERS)
        raise UserError(f"Unknown provider {provider!r}. Use one of {known}.")
    return provider


def _env_model(provider: str) -> str | None:
    # AI_UTILS_MODEL belongs to the default provider (AI_UTILS_PROVIDER or openrouter); a model id for
    # OpenRouter would be wrong for an explicitly requested "claude-cli".
    if provider != (os.environ.get("AI_UTILS_PROVIDER") or _DEFAULT_PROVIDER):
        return None
    return os.environ.get("AI_UTILS_MODEL") or None


def _api_key(provider: str, api_key: str | None) -> str:
    if api_key:
        return api_key
    names = _KEY_ENV[provider]
    for name in names:
        if value := os.environ.get(name):
            return value
    raise UserError(
        f"get_llm({provider!r}) needs an API key: set the environment variable {' or '.join(names)}, "
        "or pass api_key=..."
    )


def _base_url(provider: str, base_url: str | None) -> str:
    default, env = _BASE_URLS[provider]
    return base_url or os.environ.get(env) or default


def _check_options(provider: str, *, model: str | None, data_safe: bool, free: bool, reasoning: str | None) -> None:
    if reasoning is not None and reasoning not in get_args(Reasoning):
        raise UserError(f"Unknown reasoning level {reasoning!r}. Use one of {', '.join(get_args(Reasoning))}, or None.")
    if free and provider != "openrouter":
        raise UserError(f"free=True works only with provider 'openrouter', not {provider!r}. Drop free=True.")
    if free and model is not None:
        raise UserError(f"free=True picks the model itself; it cannot be combined with model={model!r}. Pass one.")
    if data_safe and provider not in _DATA_SAFE_OK:
        raise UserError(
            f"data_safe=True cannot be enforced for provider {provider!r}. Use 'openrouter' (zero data retention "
            "routing) or 'local', or drop data_safe=True."
        )


def _openrouter_extra_body(extra_body: Any, *, reasoning: str | None, data_safe: bool) -> dict[str, Any] | None:
    body: dict[str, Any] = dict(extra_body or {})
    if reasoning is not None:
        body["reasoning"] = {**(body.get("reasoning") or {}), "effort": reasoning}
    if data_safe:
        body["provider"] = {**(body.get("provider") or {}), "data_collection": "deny", "zdr": True}
    return body or None


def _check_kwargs(provider: str, kwargs: Mapping[str, Any]) -> None:
    """Refuse keyword arguments the model class does not take (``temprature=``): they would reach the API."""
    fields = ChatOpenAICompatible.model_fields
    known = set(fields) | {f.alias for f in fields.values() if f.alias}
    unknown = [key for key in kwargs if key not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f" Did you mean {close[0]}=?" if close else ""
        raise UserError(
            f"get_llm({provider!r}) got an unknown argument {unknown[0]}=.{hint} Provider-specific request "
            "parameters go in `model_kwargs={...}` or `extra_body={...}`."
        )


class _NoServerError(ProviderError, ConnectionError):
    """A local server that did not answer; also a `ConnectionError`, so a model profile falls back to its next model."""


def _no_server(url: str, error: Exception) -> ProviderError:
    return _NoServerError(
        f"No local model server answered at {url} ({error}). Start it (e.g. `ollama serve`) or point "
        "LOCAL_LLM_BASE_URL (or base_url=...) at the running server.",
        provider="local",
    )


class _LocalChatModel(ChatOpenAICompatible):
    """`ChatOpenAICompatible` for ``provider="local"``: a server that is not running is named by its URL."""

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            return super()._generate(*args, **kwargs)
        except openai.APIConnectionError as error:
            raise _no_server(str(self.openai_api_base), error) from error

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            return await super()._agenerate(*args, **kwargs)
        except openai.APIConnectionError as error:
            raise _no_server(str(self.openai_api_base), error) from error

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        try:
            yield from super()._stream(*args, **kwargs)
        except openai.APIConnectionError as error:
            raise _no_server(str(self.openai_api_base), error) from error

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        try:
            async for chunk in super()._astream(*args, **kwargs):
                yield chunk
        except openai.APIConnectionError as error:
            raise _no_server(str(self.openai_api_base), error) from error


def _compatible(
    provider: str,
    model: str,
    *,
    temperature: float | None,
    reasoning: str | None,
    data_safe: bool,
    api_key: str,
    base_url: str,
    kwargs: dict[str, Any],
) -> ChatOpenAICompatible:
    _check_kwargs(provider, kwargs)
    params: dict[str, Any] = {"model": model, "api_key": api_key, "base_url": base_url, **kwargs}
    if temperature is not None:
        params["temperature"] = temperature
    if provider == "openrouter":
        params["extra_body"] = _openrouter_extra_body(
            params.get("extra_body"), reasoning=reasoning, data_safe=data_safe
        )
        params.setdefault("provider_label", "openrouter")
        params.setdefault("history_reasoning_key", "reasoning")
    elif reasoning is not None:
        params["reasoning_effort"] = reasoning
    if provider == "openai":
        # Let ChatOpenAI route Responses-API-only models (e.g. "-pro") there; compatible servers get Chat Completions.
        params.setdefault("use_responses_api", None)
    return _LocalChatModel(**params) if provider == "local" else ChatOpenAICompatible(**params)


def _cli(provider: str, model: str, *, reasoning: Reasoning | None, kwargs: dict[str, Any]) -> CLIChatModel:
    cls: type[CLIChatModel] = ChatClaudeCLI if provider == "claude-cli" else ChatCodexCLI
    executable = kwargs.pop("executable", None) or os.environ.get(cls.env_var) or cls.provider.removesuffix("-cli")
    if shutil.which(executable) is None:
        raise UserError(
            f"The {provider} executable {executable!r} was not found. Install the CLI and log in, "
            f"or set {cls.env_var} to its path."
        )
    return cls(model=model, executable=executable, reasoning=reasoning, **kwargs)


def _fake(model: str | None, kwargs: dict[str, Any]) -> BaseChatModel:
    from ai_utils.testing import FakeChatModel

    if "responses" not in kwargs:
        raise UserError('get_llm("fake") needs the scripted replies: get_llm("fake", responses=["hello", ...]).')
    responses = kwargs.pop("responses")
    if model is not None:
        kwargs["model"] = model
    return FakeChatModel(responses=responses, **kwargs)


def _from_profile(
    provider: str, model: str | None, profile: Any, profiles: Any, options: dict[str, Any]
) -> BaseChatModel:
    # A gateway Route passes its `model`; naming the profile there too is allowed (Route("f", "openrouter", "fast",
    # options={"profile": "fast", "profiles": ...})).
    if model is not None and model != profile:
        raise UserError(f"Pass either model={model!r} or profile={profile!r}, not both: a profile names its models.")
    if profile is None:
        raise UserError("`profiles` was given without `profile`; pass profile='<name>' to pick one.")
    from ai_utils.routing._fallback import profile_llm

    return profile_llm(get_llm, _resolve_provider(provider), profile, profiles, providers=PROVIDERS, options=options)


def get_llm(
    provider: str = _DEFAULT_PROVIDER,
    model: str | None = None,
    *,
    temperature: float | None = None,
    reasoning: Literal["minimal", "low", "medium", "high"] | None = None,
    data_safe: bool = False,
    free: bool = False,
    api_key: str | None = None,
    base_url: str | None = None,
    profile: str | None = None,
    profiles: ModelProfiles | Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> BaseChatModel:
    """Create a chat model for a provider, with keys and base URLs from the environment.

    Providers (class; default model; key; base URL env and default):

    - ``"openrouter"``: `ChatOpenAICompatible`; ``openai/gpt-5.6-luna``; ``OPENROUTER_API_KEY``;
      ``OPENROUTER_BASE_URL``, ``https://openrouter.ai/api/v1``.
    - ``"openai"``: `ChatOpenAICompatible`; ``gpt-5.6-luna``; ``OPENAI_API_KEY``; ``OPENAI_BASE_URL``,
      ``https://api.openai.com/v1``.
    - ``"groq"``: ``ChatGroq`` (extra ``groq``); ``llama-3.3-70b-versatile``; ``CHATGROQ_API_KEY`` or
      ``GROQ_API_KEY``; ``GROQ_BASE_URL``, ``https://api.groq.com``.
    - ``"local"``: `ChatOpenAICompatible`; ``llama3.2:3b``; no key; ``LOCAL_LLM_BASE_URL``,
      ``http://localhost:11434/v1`` (Ollama).
    - ``"claude-cli"``: `ChatClaudeCLI`; ``sonnet``; the CLI's login; executable ``AI_UTILS_CLAUDE_CLI``
      or ``claude``.
    - ``"codex-cli"``: `ChatCodexCLI`; ``gpt-5.5``; the CLI's login; executable ``AI_UTILS_CODEX_CLI``
      or ``codex``.
    - ``"fake"``: `ai_utils.testing.FakeChatModel`; pass ``responses=[...]``.

    ``AI_UTILS_PROVIDER`` replaces the default provider and ``AI_UTILS_MODEL`` that provider's default model when the
    argument is not given. The OpenAI-compatible class keeps reasoning text out of ``content`` and in a
    ``{"type": "reasoning"}`` content block (plain ``ChatOpenAI`` drops it).

    Args:
        provider: one of the providers above.
        model: the provider's model id; None picks the default (or ``AI_UTILS_MODEL``).
        temperature: sampling temperature; ignored by the CLI providers.
        reasoning: reasoning effort. OpenRouter: ``extra_body={"reasoning": {"effort": ...}}``; openai and
            local: ``reasoning_effort``; claude-cli: ``--effort``; codex-cli: ``-c model_reasoning_effort``;
            groq ignores it.
        data_safe: OpenRouter only routes to providers that neither collect nor retain data
            (``provider: {"data_collection": "deny", "zdr": true}``, merged into ``extra_body``).
            Allowed for ``local``/``fake``; other providers raise.
        free: OpenRouter picks the best currently free model (tool calling, then context length, then
            newest), looked up once per process.
        api_key: the key; defaults to the provider's environment variable.
        base_url: the API root; defaults to the provider's base URL environment variable, then its default.
        profile: a profile of ``profiles`` instead of ``model``: the model tries the profile's concrete models in
            order, moving on only for retriable errors (429, 5xx, timeout, connection; never another 4xx). An id
            ``"<provider>:<model>"`` uses that provider. Each model's own SDK retries default to 0 there.
        profiles: the `ModelProfiles` (or a mapping of definitions) that ``profile`` names.
        **kwargs: passed to the model class, e.g. ``max_tokens``, ``timeout``, ``max_retries``, ``extra_body``;
            for the CLIs ``executable``, ``timeout``, ``cwd``, ``extra_args``; for fake ``responses``.

    Returns:
        A LangChain chat model.

    Raises:
        UserError: unknown provider or reasoning level, a missing key or CLI executable, or options that
            do not fit the provider.
        ModelProfileError: ``profile`` cannot be resolved (unknown, cycle, too deep, too many models, not allowed).
        ProviderError: ``free=True`` and the free model list cannot be fetched or lists no free model.
    """
    if profile is not None or profiles is not None:
        options: dict[str, Any] = {"temperature": temperature, "reasoning": reasoning, "data_safe": data_safe}
        options["free"] = free
        options.update(api_key=api_key, base_url=base_url, **kwargs)
        return _from_profile(provider, model, profile, profiles, options)
    provider = _resolve_provider(provider)
    _check_options(provider, model=model, data_safe=data_safe, free=free, reasoning=reasoning)
    if provider == "fake":
        return _fake(model, kwargs)
    chosen = model or _env_model(provider) or DEFAULT_MODELS[provider]
    if provider in ("claude-cli", "codex-cli"):
        return _cli(provider, chosen, reasoning=reasoning, kwargs=kwargs)
    key = _LOCAL_DUMMY_KEY if provider == "local" and not api_key else _api_key(provider, api_key)
    url = _base_url(provider, base_url)
    if provider == "groq":
        from ai_utils.llm._groq import chat_groq

        return chat_groq(model=chosen, api_key=key, base_url=url, temperature=temperature, **kwargs)
    if free:
        chosen = free_model(url)
    return _compatible(
        provider,
        chosen,
        temperature=temperature,
        reasoning=reasoning,
        data_safe=data_safe,
        api_key=key,
        base_url=url,
        kwargs=kwargs,
    )
