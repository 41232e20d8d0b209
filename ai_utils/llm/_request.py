"""Per-request options (temperature, max tokens, response format, betas) in each provider's own terms.

`bind_request(model, tools=..., options=...)` binds the tools and the options a call asks for to a chat model
built by `get_llm`, translated for its provider, and names the options that provider does not take (they are
left out, so nothing unsupported reaches the API):

- ``temperature``: sent as ``temperature`` to every provider.
- ``max_tokens``: ``max_tokens`` (OpenAI, OpenRouter, local, groq, DeepSeek, Anthropic); ``max_output_tokens``
  (Gemini).
- ``response_format`` (``"text"``, ``"json_object"`` or OpenAI's ``json_schema`` shape): as is for the
  OpenAI-compatible providers; DeepSeek takes ``json_object`` only; Anthropic takes ``json_schema`` only
  (langchain-anthropic sends it as ``output_config.format``); Gemini gets ``response_mime_type`` (plus
  ``response_json_schema``). Plain text is every provider's default and never sent.
- ``betas``: Anthropic only (the ``anthropic-beta`` header); dropped for every other provider.

Other models (the CLIs, test fakes) take none of them. The provider is recognised by the model's class (its
MRO names), so no optional package is imported here. A model may answer for itself with a ``bind_request``
method of its own (the profile fallback model binds each of its models).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable
from typing_extensions import TypedDict

from ai_utils.exceptions import UserError

__all__ = ["RequestOptions", "ResponseFormat", "bind_request", "request_kwargs"]

ResponseFormat: TypeAlias = Literal["text", "json_object"] | Mapping[str, Any]
"""``"text"`` (default), ``"json_object"``, or ``{"type": "json_schema", "json_schema": {"name", "schema",
"strict"?}}`` (OpenAI's shape; ``{"type": "text" | "json_object"}`` too)."""


class RequestOptions(TypedDict, total=False):
    """The per-request options of a gateway call; a key that is absent (or ``None``) is not asked for."""

    temperature: float
    max_tokens: int
    response_format: ResponseFormat
    betas: Sequence[str]


_Family = Literal["openai", "deepseek", "anthropic", "gemini", "other"]

# MRO class names -> provider family (the first match wins; ChatDeepSeek is also a BaseChatOpenAI).
_FAMILIES: tuple[tuple[str, _Family], ...] = (
    ("ChatDeepSeek", "deepseek"),
    ("ChatAnthropic", "anthropic"),
    ("ChatGoogleGenerativeAI", "gemini"),
    ("BaseChatOpenAI", "openai"),
    ("ChatGroq", "openai"),
)


def _family(model: BaseChatModel) -> _Family:
    return _family_of(type(model))


@functools.cache
def _family_of(kind: type) -> _Family:  # once per model class: every gateway call asks
    names = {cls.__name__ for cls in kind.__mro__}
    return next((family for name, family in _FAMILIES if name in names), "other")


@functools.cache
def _binds_itself(kind: type) -> bool:  # once per model class (on a pydantic model a missing attribute raises)
    return callable(getattr(kind, "bind_request", None))


def _response_format(value: ResponseFormat) -> dict[str, Any] | None:
    """The OpenAI-shaped format, ``None`` for plain text; `UserError` for anything else."""
    if value == "text":
        return None
    if value == "json_object":
        return {"type": "json_object"}
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind == "text":
            return None
        if kind == "json_object":
            return {"type": "json_object"}
        spec = value.get("json_schema")
        if kind == "json_schema" and isinstance(spec, Mapping) and isinstance(spec.get("schema"), Mapping):
            return {"type": "json_schema", "json_schema": dict(spec)}
    raise UserError(
        f"response_format={value!r} is not a response format. Use 'text', 'json_object' or "
        '{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}.'
    )


def request_kwargs(model: BaseChatModel, options: RequestOptions) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The call keyword arguments that carry ``options`` to ``model``'s provider, and the option names it drops.

    Args:
        model: a chat model (built by `get_llm`).
        options: the requested options.

    Returns:
        ``(kwargs, dropped)``.

    Raises:
        UserError: a malformed ``response_format`` or ``betas``.
    """
    family = _family(model)
    kwargs: dict[str, Any] = {}
    dropped: list[str] = []
    given: dict[str, Any] = {name: value for name, value in options.items() if value is not None}
    if "response_format" in given and _response_format(given["response_format"]) is None:
        del given["response_format"]  # plain text is every provider's default
    if family == "other":
        return {}, tuple(given)
    if "temperature" in given:
        kwargs["temperature"] = given["temperature"]
    if "max_tokens" in given:
        kwargs["max_output_tokens" if family == "gemini" else "max_tokens"] = given["max_tokens"]
    if "response_format" in given:
        fmt = _response_format(given["response_format"]) or {}
        if family == "gemini":
            kwargs["response_mime_type"] = "application/json"
            if fmt["type"] == "json_schema":
                kwargs["response_json_schema"] = dict(fmt["json_schema"]["schema"])
        elif (family == "anthropic" and fmt["type"] != "json_schema") or (
            family == "deepseek" and fmt["type"] != "json_object"
        ):
            dropped.append("response_format")  # Anthropic has no JSON mode; DeepSeek no JSON schema
        else:
            kwargs["response_format"] = fmt
    if "betas" in given:
        betas = given["betas"]
        if isinstance(betas, str) or not all(isinstance(b, str) for b in betas):
            raise UserError(f"betas={betas!r} must be a list of beta names, e.g. ['computer-use-2025-01-24'].")
        if family == "anthropic":
            kwargs["betas"] = list(betas)
        else:
            dropped.append("betas")
    return kwargs, tuple(dropped)


def bind_request(
    model: BaseChatModel, *, tools: Sequence[Any] = (), options: RequestOptions | None = None
) -> tuple[Runnable[LanguageModelInput, AIMessage], tuple[str, ...]]:
    """Bind ``tools`` and the per-request ``options`` to ``model`` in its provider's terms.

    Args:
        model: a chat model (built by `get_llm`; a model with a ``bind_request`` method of its own binds itself).
        tools: tools to offer (anything ``bind_tools`` accepts).
        options: the requested options.

    Returns:
        ``(runnable, dropped)``: the model ready to call, and the names of the options its provider does not take.
    """
    if _binds_itself(type(model)):
        bound: tuple[Runnable[LanguageModelInput, AIMessage], tuple[str, ...]] = model.bind_request(  # type: ignore[attr-defined]
            tools=tools, options=options or {}
        )
        return bound
    if not tools and not options:
        return model, ()  # the plain call (nothing to bind, nothing dropped)
    kwargs, dropped = request_kwargs(model, options or {})
    runnable: Runnable[LanguageModelInput, AIMessage] = model.bind_tools(list(tools)) if tools else model
    if kwargs:
        runnable = runnable.bind(**kwargs)
    return runnable, dropped
