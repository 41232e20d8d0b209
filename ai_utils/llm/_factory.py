"""`get_llm`: one call from a provider name to a ready LangChain chat model."""

from __future__ import annotations

import difflib
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
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

__all__ = ["ALIASES", "BASE_URLS", "DEFAULT_MODELS", "KEY_ENV", "PROVIDERS", "get_llm"]

PROVIDERS: Final = (
    "openrouter",
    "openai",
    "anthropic",
    "gemini",
    "deepseek",
    "groq",
    "local",
    "claude-cli",
    "codex-cli",
    "fake",
)

# Other spellings of a provider: the seed's getLLM({from: "chatgroq"}).
ALIASES: Final[Mapping[str, str]] = {"chatgroq": "groq"}

DEFAULT_MODELS: Final[Mapping[str, str]] = {
    "openrouter": "openai/gpt-5.6-luna",
    "openai": "gpt-5.6-luna",
    "anthropic": "claude-sonnet-5-5",
    "gemini": "gemini-flash-latest",
    "deepseek": "deepseek-v4-flash",
    "groq": "llama-3.3-70b-versatile",
    "local": "llama3.2:3b",
    "claude-cli": "sonnet",
    "codex-cli": "gpt-5.5",
    "fake": "fake-chat-model",
}

# provider -> (default base URL, env override)
BASE_URLS: Final[Mapping[str, tuple[str, str]]] = {
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_BASE_URL"),
    "openai": ("https://api.openai.com/v1", "OPENAI_BASE_URL"),
    "anthropic": ("https://api.anthropic.com", "ANTHROPIC_BASE_URL"),
    "gemini": ("https://generativelanguage.googleapis.com", "GEMINI_BASE_URL"),
    "deepseek": ("https://api.deepseek.com/v1", "DEEPSEEK_BASE_URL"),
    "groq": ("https://api.groq.com", "GROQ_BASE_URL"),
    "local": ("http://localhost:11434/v1", "LOCAL_LLM_BASE_URL"),
}

# provider -> env variables holding its key, first found wins
KEY_ENV: Final[Mapping[str, tuple[str, ...]]] = {
    "openrouter": ("OPENROUTER_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "groq": ("CHATGROQ_API_KEY", "GROQ_API_KEY"),
}

# Providers with an SDK of their own (LangChain integration package), built in one leaf module each.
_NATIVE: Final = ("anthropic", "gemini", "deepseek")

# Model ids a user may pass where a provider is expected (`Agent(llm="gpt-4o")`), by prefix -> their provider.
_MODEL_PREFIXES: Final = (
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("claude", "anthropic"),
    ("gemini", "gemini"),
    ("deepseek", "deepseek"),
    ("llama", "groq"),
)

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
    provider = ALIASES.get(provider, provider)
    if provider not in PROVIDERS:
        known = ", ".join(repr(p) for p in PROVIDERS)
        raise UserError(f"Unknown provider {provider!r}. Use one of {known}.{_model_hint(provider)}")
    return provider


def _model_hint(value: object) -> str:
    """For a model id given as the provider (``Agent(llm="gpt-4o")``): the ``"provider:model"`` form to use."""
    if not isinstance(value, str) or not value:
        return ""
    close = difflib.get_close_matches(value.lower(), [*PROVIDERS, *ALIASES], n=1, cutoff=0.8)
    if close:
        return f" Did you mean {close[0]!r}?"
    guess = next((p for prefix, p in _MODEL_PREFIXES if value.lower().startswith(prefix)), "openrouter")
    return (
        f' If {value!r} is a model, name its provider too: the string "{guess}:{value}" '
        f'(e.g. `Agent(llm="{guess}:{value}")`) or get_llm({guess!r}, {value!r}).'
    )


def _env_model(provider: str) -> str | None:
    # AI_UTILS_MODEL belongs to the default provider (AI_UTILS_PROVIDER or openrouter); a model id for
    # OpenRouter would be wrong for an explicitly requested "claude-cli".
    if provider != (os.environ.get("AI_UTILS_PROVIDER") or _DEFAULT_PROVIDER):
        return None
    return os.environ.get("AI_UTILS_MODEL") or None


def _api_key(provider: str, api_key: str | None) -> str:
    if api_key:
        return api_key
    names = KEY_ENV[provider]
    for name in names:
        if value := os.environ.get(name):
            return value
    raise UserError(
        f"get_llm({provider!r}) needs an API key: set the environment variable {' or '.join(names)}, "
        "or pass api_key=..."
    )


def _base_url(provider: str, base_url: str | None) -> str:
    default, env = BASE_URLS[provider]
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


def _check_kwargs(provider: str, kwargs: Mapping[str, Any], cls: type[BaseChatModel] = ChatOpenAICompatible) -> None:
    """Refuse keyword arguments the model class does not take (``temprature=``): they would reach the API."""
    fields = cls.model_fields
    known = set(fields) | {f.alias for f in fields.values() if f.alias}
    unknown = [key for key in kwargs if key not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f" Did you mean {close[0]}=?" if close else ""
        where = " or ".join(f"`{name}={{...}}`" for name in ("model_kwargs", "extra_body") if name in fields)
        raise UserError(
            f"get_llm({provider!r}) got an unknown argument {unknown[0]}=.{hint} Provider-specific request "
            f"parameters go in {where or 'the model class'}."
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


def _openai_options(provider: str, kwargs: dict[str, Any]) -> None:
    """Turn ``responses_api=``, ``organization=`` and ``project=`` into `ChatOpenAI` settings (openai only)."""
    given = [name for name in ("responses_api", "organization", "project") if name in kwargs]
    if not given:
        return
    if provider != "openai":
        raise UserError(f"{given[0]}= is an option of provider 'openai', not {provider!r}. Drop it.")
    responses_api = kwargs.pop("responses_api", None)
    if responses_api is not None:
        if not isinstance(responses_api, bool):
            raise UserError(f"responses_api={responses_api!r} must be True or False.")
        # True: the OpenAI Responses API (POST /responses) for every call; False: always Chat Completions.
        kwargs["use_responses_api"] = responses_api
    project = kwargs.pop("project", None)
    if project is not None:
        # ChatOpenAI has no project field; the OpenAI SDK sends `project` as this header.
        kwargs["default_headers"] = {**(kwargs.get("default_headers") or {}), "OpenAI-Project": str(project)}


def _leaf(provider: str) -> tuple[type[BaseChatModel], Callable[..., BaseChatModel]]:
    """The model class and builder of a provider's leaf module (the one module that imports its package)."""
    if provider == "anthropic":
        from ai_utils.llm._anthropic import ChatAnthropicModel, chat_anthropic

        return ChatAnthropicModel, chat_anthropic
    if provider == "gemini":
        from ai_utils.llm._gemini import ChatGeminiModel, chat_gemini

        return ChatGeminiModel, chat_gemini
    from ai_utils.llm._deepseek import ChatDeepSeekModel, chat_deepseek

    return ChatDeepSeekModel, chat_deepseek


def _native(
    provider: str,
    model: str,
    *,
    temperature: float | None,
    reasoning: str | None,
    api_key: str,
    base_url: str,
    kwargs: dict[str, Any],
) -> BaseChatModel:
    """A model of a provider with its own LangChain integration package, from its leaf module."""
    cls, build = _leaf(provider)
    _check_kwargs(provider, kwargs, cls)
    return build(
        model=model, api_key=api_key, base_url=base_url, temperature=temperature, reasoning=reasoning, **kwargs
    )


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
      ``https://api.openai.com/v1``. ``responses_api=True`` uses the OpenAI Responses API; ``organization=`` /
      ``project=`` scope billing.
    - ``"anthropic"``: ``ChatAnthropic`` (extra ``anthropic``); ``claude-sonnet-5-5``; ``ANTHROPIC_API_KEY``;
      ``ANTHROPIC_BASE_URL``, ``https://api.anthropic.com``.
    - ``"gemini"``: ``ChatGoogleGenerativeAI`` (extra ``gemini``, the Gemini Developer API);
      ``gemini-flash-latest``; ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY``; ``GEMINI_BASE_URL``,
      ``https://generativelanguage.googleapis.com``.
    - ``"deepseek"``: ``ChatDeepSeek`` (extra ``deepseek``); ``deepseek-v4-flash``; ``DEEPSEEK_API_KEY``;
      ``DEEPSEEK_BASE_URL``, ``https://api.deepseek.com/v1``.
    - ``"groq"`` (also ``"chatgroq"``): ``ChatGroq`` (extra ``groq``); ``llama-3.3-70b-versatile``;
      ``CHATGROQ_API_KEY`` or ``GROQ_API_KEY``; ``GROQ_BASE_URL``, ``https://api.groq.com``.
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
            local: ``reasoning_effort``; anthropic: ``reasoning_effort`` (``"minimal"`` is ``"low"``); gemini: the
            thinking level; claude-cli: ``--effort``; codex-cli: ``-c model_reasoning_effort``; groq and deepseek
            ignore it.
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
        **kwargs: passed to the model class, e.g. ``max_tokens``, ``timeout``, ``max_retries`` (retries after
            the first attempt, for every provider), ``extra_body``; for openai also ``responses_api``,
            ``organization``, ``project``; for the CLIs ``executable``, ``timeout``, ``cwd``, ``extra_args``; for
            fake ``responses``.

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
    _openai_options(provider, kwargs)
    key = _LOCAL_DUMMY_KEY if provider == "local" and not api_key else _api_key(provider, api_key)
    url = _base_url(provider, base_url)
    if provider in _NATIVE:
        return _native(
            provider, chosen, temperature=temperature, reasoning=reasoning, api_key=key, base_url=url, kwargs=kwargs
        )
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
