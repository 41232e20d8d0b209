"""Pick the best currently free OpenRouter model (``get_llm("openrouter", free=True)``).

The model list is fetched once per process and base URL; the choice is a pure function of the list.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ai_utils.exceptions import ProviderError

__all__ = ["free_model", "is_free", "select_free_model"]

_cache: dict[str, str] = {}
_lock = threading.Lock()


def _price(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def is_free(model: Mapping[str, Any]) -> bool:
    """Tell whether an OpenRouter model entry costs nothing.

    Args:
        model: one entry of ``GET /models`` ``data``.

    Returns:
        True for an id ending in ``:free`` or a zero prompt and completion price.
    """
    if str(model.get("id", "")).endswith(":free"):
        return True
    pricing = model.get("pricing")
    if not isinstance(pricing, Mapping):
        return False
    return _price(pricing.get("prompt")) == 0 and _price(pricing.get("completion")) == 0


def _rank(model: Mapping[str, Any]) -> tuple[bool, int, int]:
    params = model.get("supported_parameters")
    has_tools = isinstance(params, list) and "tools" in params
    context = model.get("context_length")
    created = model.get("created")
    return (
        has_tools,
        context if isinstance(context, int) else 0,
        created if isinstance(created, int) else 0,
    )


def select_free_model(models: Sequence[Mapping[str, Any]]) -> str | None:
    """Choose the best free model: tool calling first, then the largest context, then the newest.

    Args:
        models: the ``data`` entries of OpenRouter's ``GET /models``.

    Returns:
        The chosen model id, or None when no entry is free.
    """
    free = [m for m in models if isinstance(m, Mapping) and m.get("id") and is_free(m)]
    if not free:
        return None
    return str(max(free, key=_rank)["id"])


def _fetch_models(url: str, timeout: float) -> list[Any]:
    fix = "Check the network or OPENROUTER_BASE_URL, or pass model=... instead of free=True."
    try:
        response = httpx.get(url, timeout=timeout, headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        raise ProviderError(
            f"Could not fetch the OpenRouter model list from {url!r}: {exc}. {fix}", provider="openrouter"
        ) from exc
    if response.status_code != 200:
        raise ProviderError(
            f"Fetching the OpenRouter model list from {url!r} failed with HTTP {response.status_code}. {fix}",
            provider="openrouter",
        )
    try:
        data = response.json()["data"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ProviderError(
            f"The OpenRouter model list from {url!r} is not the expected JSON ({{'data': [...]}}). {fix}",
            provider="openrouter",
        ) from exc
    if not isinstance(data, list):
        raise ProviderError(f"The OpenRouter model list from {url!r} has no 'data' list. {fix}", provider="openrouter")
    return data


def free_model(base_url: str, *, timeout: float = 15.0) -> str:
    """The best currently free model at ``base_url``, fetched once per process and base URL.

    Args:
        base_url: the OpenRouter API root, e.g. ``https://openrouter.ai/api/v1``.
        timeout: seconds to wait for the model list.

    Returns:
        The model id to use.

    Raises:
        ProviderError: the list cannot be fetched or parsed, or no model in it is free.
    """
    key = base_url.rstrip("/")
    with _lock:
        if key in _cache:
            return _cache[key]
        url = f"{key}/models"
        chosen = select_free_model(_fetch_models(url, timeout))
        if chosen is None:
            raise ProviderError(
                f"No free model is listed at {url!r} right now. Pass model=... (and free=False) to pick a paid one.",
                provider="openrouter",
            )
        _cache[key] = chosen
        return chosen
