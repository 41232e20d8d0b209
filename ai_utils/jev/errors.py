"""Errors raised by the Jev client.

```
AiUtilsError
└── JevError                      # anything that went wrong talking to Jev
    ├── JevAPIError               # non-2xx reply; .status, .body, .request_id
    │   └── JevResponseError      # 2xx reply that is not valid JSON or does not answer what was asked
    ├── JevTimeoutError           # also a builtin TimeoutError; .timeout
    └── JevConnectionError        # also a builtin ConnectionError: the server could not be reached
```
"""

from __future__ import annotations

from typing import Any

from ai_utils.exceptions import AiUtilsError

__all__ = ["JevAPIError", "JevConnectionError", "JevError", "JevResponseError", "JevTimeoutError"]


class JevError(AiUtilsError):
    """Root of the errors raised while talking to the Jev decisions API."""


class JevAPIError(JevError):
    """The Jev API answered with a non-2xx status.

    Attributes:
        status: the HTTP status code, e.g. ``429``.
        body: the reply body: parsed JSON when it parses, else the raw text, or ``None`` when empty.
        request_id: the provider's request id when the reply carries one.
    """

    def __init__(self, message: str, *, status: int, body: Any = None, request_id: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.request_id = request_id


class JevResponseError(JevAPIError):
    """A 2xx reply that is not valid JSON, or does not answer the questions that were asked."""


class JevTimeoutError(JevError, TimeoutError):
    """Jev did not answer within the caller's timeout (retries included).

    Attributes:
        timeout: the timeout in seconds that ran out.
    """

    def __init__(self, message: str, *, timeout: float) -> None:
        super().__init__(message)
        self.timeout = timeout


class JevConnectionError(JevError, ConnectionError):
    """The Jev server could not be reached, also after the allowed retries."""
