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
├── ThreadBusyError (UserError)      # another process ran a turn on the thread past run_lock_timeout; .thread_id
├── SessionBusyError (UserError)     # ai_utils.sessions: on_busy="reject" and a turn runs; .code, .session_id
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

from typing import Any, TypeVar

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
    "ThreadBusyError",
    "UserError",
]


class AiUtilsError(Exception):
    """Root of every error ai_utils raises on purpose.

    Every subclass pickles with its message and the attributes its ``__init__`` set, whatever keywords that
    ``__init__`` takes (plain `Exception` pickling would call it again with the message alone).
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt without calling __init__ again: args (the message) and the attribute dict are restored as-is.
        return (_rebuild, (type(self), self.args), self.__dict__ or None)


_E = TypeVar("_E", bound=AiUtilsError)


def _rebuild(cls: type[_E], args: tuple[Any, ...]) -> _E:
    error = cls.__new__(cls, *args)
    error.args = args  # OSError subclasses with their own __init__ (JevTimeoutError) leave args to it
    return error


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


class ProviderError(AiUtilsError):
    """A model provider (HTTP API or local CLI) failed to answer.

    Attributes:
        provider: the provider name, e.g. ``"claude-cli"``.
    """

    def __init__(self, message: str, *, provider: str) -> None:
        super().__init__(message)
        self.provider = provider


class SessionFencedError(AiUtilsError):
    """Another process took over this durable session's lease; this process's write was refused.

    Nothing the replaced process tried to write after the takeover is visible to readers.

    Attributes:
        session_id: the session.
    """

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


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


class ThreadBusyError(UserError):
    """Another process kept running a turn on this thread of a shared checkpointer past ``run_lock_timeout``.

    Raised before the run starts: nothing of this call ran or was stored. Retry later, or serve the
    conversation with durable sessions, which queue the turns of one conversation across processes.

    Attributes:
        thread_id: the busy thread.
        waited: how long the run waited, in seconds.
    """

    def __init__(self, message: str, *, thread_id: str, waited: float) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.waited = waited


class SessionBusyError(UserError):
    """A prompt with ``on_busy="reject"`` reached a session that runs (or queues) a turn; nothing was stored.

    Attributes:
        code: always ``"SESSION_BUSY"``.
        session_id: the session.
    """

    code = "SESSION_BUSY"

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class LoopDefinitionError(UserError):
    """A governed loop definition is invalid (unknown step, bad CEL, ``next`` to nowhere, a cycle with no exit, ...).

    Attributes:
        step_key: the step the problem is in, or ``None`` for loop-wide problems.
    """

    def __init__(self, message: str, *, step_key: str | None = None) -> None:
        super().__init__(message)
        self.step_key = step_key


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


class LoopPolicyDeniedError(LoopError):
    """A guardrail (``LoopRunner(middleware=guardrails(...))``) blocked a ``tool_step``'s tool call.

    Attributes:
        policy_id: the guardrail policy that blocked it (e.g. ``"tool.network"``), or ``None`` when a middleware
            answered the call without running the tool.
        tool: the tool that was not called.
    """

    def __init__(
        self, message: str, *, step_key: str | None = None, policy_id: str | None = None, tool: str = ""
    ) -> None:
        super().__init__(message, step_key=step_key)
        self.policy_id = policy_id
        self.tool = tool
