"""Keep a route's API keys out of what a provider error carries: the audit row, the event, the raised error.

A broken or hostile provider can echo the key it was sent in its error body ("invalid api key sk-..."); the SDK
quotes that body in its exception message. The gateway knows the exact keys of the models it builds, so it
replaces them wherever the error text goes: before the audit row and the ``llm.call.failed`` event are written,
and in the exception the caller gets (its message, the SDKs' ``message`` / ``body`` / ``details`` /
``response_json``, and the exceptions it was raised from), so a log of the traceback cannot quote it either.
The raw HTTP response an SDK error keeps (``.response``) is left as the SDK made it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, SecretStr

__all__ = ["REDACTED", "model_secrets", "scrub", "scrub_error"]

REDACTED = "[REDACTED:api_key]"

# Shorter values are not keys (a dummy "k" would blank every "k" in the message).
_MIN_SECRET = 8


def model_secrets(model: Any) -> tuple[str, ...]:
    """The secret values (pydantic ``SecretStr`` fields) of a chat model and of the models it falls back to."""
    found: list[str] = []
    pending = [model]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseModel):
            for name in type(current).model_fields:
                value = getattr(current, name, None)
                if isinstance(value, SecretStr) and len(value.get_secret_value()) >= _MIN_SECRET:
                    found.append(value.get_secret_value())
        pending.extend(getattr(current, "models", None) or ())  # a profile's FallbackChatModel
    return tuple(dict.fromkeys(found))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced by ``[REDACTED:api_key]``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _scrub_value(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {key: _scrub_value(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub_value(item, secrets) for item in value]
    return value


def scrub_error(error: BaseException, secrets: tuple[str, ...]) -> None:
    """Remove ``secrets`` from ``error`` in place: its args and the SDKs' error-body attributes, and its causes'."""
    if not secrets:
        return
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        current.args = tuple(_scrub_value(arg, secrets) for arg in current.args)
        for attribute in ("message", "body", "details", "response_json"):  # OpenAI, Anthropic, google-genai
            value = getattr(current, attribute, None)
            if isinstance(value, str | dict | list):
                try:
                    setattr(current, attribute, _scrub_value(value, secrets))
                except AttributeError:  # a read-only property
                    pass
        current = current.__cause__ or current.__context__
