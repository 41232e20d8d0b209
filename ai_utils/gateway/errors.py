"""Gateway errors and `classify_llm_error`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from ai_utils.exceptions import AiUtilsError

if TYPE_CHECKING:
    from ai_utils.gateway.policy import PolicyDecision

__all__ = ["AuditWriteError", "ErrorType", "GatewayError", "classify_llm_error"]

ErrorType = Literal["policy", "rate_limit", "auth", "network", "provider", "unknown"]


class GatewayError(AiUtilsError):
    """The gateway refused a call: a policy rule denied it or the feature has no route.

    Attributes:
        decisions: every policy decision taken for the call; the last one is the denial.
    """

    def __init__(self, message: str, decisions: Sequence[PolicyDecision] = ()) -> None:
        super().__init__(message)
        self.decisions: list[PolicyDecision] = list(decisions)


class AuditWriteError(GatewayError):
    """``audit_mode="required"`` and the audit sink failed to store the row (the cause is chained)."""


_NETWORK_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "TransportError",
        "ModelConnectionError",
        "ModelTimeoutError",
    }
)
# LangChain's provider-neutral `ModelError` family (langchain-core >= 1.8), which the provider packages raise
# beside (and subclassing) their SDK's own errors.
_RATE_NAMES = frozenset({"RateLimitError", "ModelRateLimitError"})
_AUTH_NAMES = frozenset(
    {"AuthenticationError", "PermissionDeniedError", "ModelAuthenticationError", "ModelPermissionDeniedError"}
)


def _status_of(err: BaseException) -> int | None:
    # ``status_code`` (OpenAI, Anthropic, groq SDKs, httpx responses), ``status`` (aiohttp), ``code`` (google-genai,
    # whose ``status`` is the text "UNAVAILABLE"); a wrapper raised ``from`` the SDK error carries it on its cause.
    for source in (err, err.__cause__):
        for holder in (source, getattr(source, "response", None)):
            for attr in ("status_code", "status", "code"):
                value = getattr(holder, attr, None)
                if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                    return value
    return None


def classify_llm_error(err: BaseException) -> tuple[ErrorType, bool]:
    """Sort an error raised during a model call into a category for telemetry and retries.

    Works by exception class and HTTP status, so it understands the OpenAI, Anthropic, groq and google-genai
    SDKs and LangChain's ``ModelError`` family without importing them.

    Args:
        err: the exception.

    Returns:
        ``(type, retriable)``: ``"policy"`` (a `GatewayError`, not retriable), ``"rate_limit"`` (429,
        retriable), ``"auth"`` (401/403), ``"network"`` (connection problems and timeouts, retriable),
        ``"provider"`` (any other HTTP status; retriable for 408, 409 and 5xx) or ``"unknown"``.
    """
    if isinstance(err, AuditWriteError):
        return ("unknown", False)
    if isinstance(err, GatewayError):
        return ("policy", False)
    names = {cls.__name__ for cls in type(err).__mro__}
    status = _status_of(err)
    if status == 429 or names & _RATE_NAMES:
        return ("rate_limit", True)
    if status in (401, 403) or names & _AUTH_NAMES:
        return ("auth", False)
    if names & _NETWORK_NAMES or isinstance(err, (ConnectionError, TimeoutError)):
        return ("network", True)
    if status is not None:
        return ("provider", status in (408, 409) or status >= 500)
    if "ModelError" in names:
        return ("provider", bool(getattr(err, "is_retryable", False)))
    if "ProviderError" in names or "APIError" in names:
        return ("provider", False)
    return ("unknown", False)
