"""The ai_utils error tree.

```
AiUtilsError(Exception)              # root: `except ai_utils.AiUtilsError` catches everything we raise
├── UserError                        # a caller mistake: bad argument, unknown provider, missing key
│   └── ModelProfileError            #   a model profile that cannot be resolved (fail closed); .profile
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
├── LoopDefinitionError              # ai_utils.loops: a bad loop definition, found at define_loop; .step_key
├── LoopError                        # ai_utils.loops: a run fault (missing binding, no transition); .step_key, .path
│   └── LoopPermissionDeniedError    #   a tool_step's call was denied (rule or human); .rule_id, .tool
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
    "LoopDefinitionError",
    "LoopError",
    "LoopPermissionDeniedError",
    "MessageIdInUseError",
    "ModelOutputError",
    "ModelProfileError",
    "ProviderError",
    "SessionFencedError",
    "UserError",
]


class AiUtilsError(Exception):
    """Root of every error ai_utils raises on purpose."""


class UserError(AiUtilsError):
    """The caller used ai_utils wrongly: a bad argument, a missing key or setting."""


class ModelProfileError(UserError):
    """A model profile cannot be resolved: unknown, a cycle, too deep, too many models, or not allowed.

    Resolution fails closed: no model is picked when the configuration is wrong.

    Attributes:
        profile: the profile name the problem is about.
    """

    def __init__(self, message: str, *, profile: str) -> None:
        super().__init__(message)
        self.profile = profile

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_model_profile_error, (str(self), self.profile))


def _rebuild_model_profile_error(message: str, profile: str) -> ModelProfileError:
    return ModelProfileError(message, profile=profile)


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


class LoopDefinitionError(UserError):
    """A governed loop definition is invalid (unknown step, bad CEL, ``next`` to nowhere, a cycle with no exit, ...).

    Attributes:
        step_key: the step the problem is in, or ``None`` for loop-wide problems.
    """

    def __init__(self, message: str, *, step_key: str | None = None) -> None:
        super().__init__(message)
        self.step_key = step_key

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_loop_definition_error, (str(self), self.step_key))


def _rebuild_loop_definition_error(message: str, step_key: str | None) -> LoopDefinitionError:
    return LoopDefinitionError(message, step_key=step_key)


class LoopError(AiUtilsError):
    """A governed loop run failed: a missing ``ctx`` path, no matching transition, an unsafe result URL.

    Attributes:
        step_key: the step that failed, or ``None`` (result projection).
        path: the missing context path, if that was the cause.
    """

    def __init__(self, message: str, *, step_key: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.step_key = step_key
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_loop_error, (str(self), self.step_key, self.path))


def _rebuild_loop_error(message: str, step_key: str | None, path: str | None) -> LoopError:
    return LoopError(message, step_key=step_key, path=path)


class LoopPermissionDeniedError(LoopError):
    """A ``tool_step``'s tool call was denied by a permission rule (or rejected by the approver).

    Attributes:
        rule_id: the deciding rule, or ``None`` when no rule matched (default deny).
        tool: the tool that was not called.
    """

    def __init__(
        self, message: str, *, step_key: str | None = None, rule_id: str | None = None, tool: str = ""
    ) -> None:
        super().__init__(message, step_key=step_key)
        self.rule_id = rule_id
        self.tool = tool

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_loop_permission_denied_error, (str(self), self.step_key, self.rule_id, self.tool))


def _rebuild_loop_permission_denied_error(
    message: str, step_key: str | None, rule_id: str | None, tool: str
) -> LoopPermissionDeniedError:
    return LoopPermissionDeniedError(message, step_key=step_key, rule_id=rule_id, tool=tool)
