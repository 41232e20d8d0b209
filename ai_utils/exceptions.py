"""The ai_utils error tree.

```
AiUtilsError(Exception)              # root: `except ai_utils.AiUtilsError` catches everything we raise
├── UserError                        # a caller mistake: bad argument, unknown provider, missing key
├── ModelOutputError                 # a model's reply failed validation after every retry; .errors, .attempts
├── ProviderError                    # a provider/CLI call failed; .provider
├── JevError                         # ai_utils.jev.errors
│   ├── JevAPIError                  #   non-2xx reply; .status, .body, .request_id
│   │   └── JevResponseError         #     malformed reply body
│   ├── JevTimeoutError              #   also a TimeoutError
│   └── JevConnectionError           #   also a ConnectionError
├── JevNoParamOptionsError / JevParamsError (also TypeError) / JevProposalChangedError   # JevToolCaller
├── GatewayError                     # ai_utils.gateway: policy denial (.decisions), unknown feature
│   └── AuditWriteError              #   audit_mode="required" and the sink failed
├── FeedbackValidationError          # ai_utils.gateway (also ValueError)
├── SessionFencedError               # ai_utils.sessions: this process lost the session's lease; .session_id
├── MessageIdInUseError (UserError)  # ai_utils.sessions: a message id names another input; .code
├── MCPConnectionError               # ai_utils.tools: a server could not be reached or died; .server
├── SupabaseCheckpointError          # ai_utils.memory.supabase; .code
└── SupabaseVectorStoreError         # ai_utils.rag.supabase; .code, .written_ids
```

Domain errors live next to their domain and are re-exported from `ai_utils`.
Messages name the offending value with `!r` and end with the fix.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AiUtilsError",
    "MessageIdInUseError",
    "ModelOutputError",
    "ProviderError",
    "SessionFencedError",
    "UserError",
]


class AiUtilsError(Exception):
    """Root of every error ai_utils raises on purpose."""


class UserError(AiUtilsError):
    """The caller used ai_utils wrongly: a bad argument, a missing key or setting."""


class ModelOutputError(AiUtilsError):
    """A model reply could not be validated, also after the allowed retries.

    Attributes:
        errors: the last validation message.
        attempts: how many model calls were made.
        output: the last raw reply text.
    """

    def __init__(self, message: str, *, errors: str, attempts: int, output: str | None = None) -> None:
        super().__init__(message)
        self.errors = errors
        self.attempts = attempts
        self.output = output

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_model_output_error, (str(self), self.errors, self.attempts, self.output))


def _rebuild_model_output_error(message: str, errors: str, attempts: int, output: str | None) -> ModelOutputError:
    return ModelOutputError(message, errors=errors, attempts=attempts, output=output)


class ProviderError(AiUtilsError):
    """A model provider (HTTP API or local CLI) failed to answer.

    Attributes:
        provider: the provider name, e.g. ``"claude-cli"``.
    """

    def __init__(self, message: str, *, provider: str) -> None:
        super().__init__(message)
        self.provider = provider

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_provider_error, (str(self), self.provider))


def _rebuild_provider_error(message: str, provider: str) -> ProviderError:
    return ProviderError(message, provider=provider)


class SessionFencedError(AiUtilsError):
    """Another process took over this durable session's lease; this process's write was refused.

    Nothing the replaced process tried to write after the takeover is visible to readers.

    Attributes:
        session_id: the session.
    """

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_fenced, (str(self), self.session_id))


def _rebuild_fenced(message: str, session_id: str) -> SessionFencedError:
    return SessionFencedError(message, session_id=session_id)


class MessageIdInUseError(UserError):
    """A ``message_id`` already names another input of the session (a prompt's id reused by a steer, ...).

    Attributes:
        code: always ``"MESSAGE_ID_IN_USE"``.
        message_id: the id.
    """

    code = "MESSAGE_ID_IN_USE"

    def __init__(self, message: str, *, message_id: str) -> None:
        super().__init__(message)
        self.message_id = message_id

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_in_use, (str(self), self.message_id))


def _rebuild_in_use(message: str, message_id: str) -> MessageIdInUseError:
    return MessageIdInUseError(message, message_id=message_id)
