"""The actions agent (gateway seed's ``createAgent``/``respond``) as one `create_agent` middleware.

For each model call `ActionsMiddleware`:

- builds the system prompt: the caller's ``prompt`` (a str, or a callable of ``{"messages", "context",
  "actor", "metadata"}``), the static part (`Agent.system_prompt`), and with ``actions`` the actions the
  run's actor may propose (``registry.available(actor)``: id, description, params schema) with the directive
  syntax (`render_actions_prompt`);
- after the reply: parses its ``!>``/``?>`` directives (at most ``max_actions`` proposals count per run),
  validates each proposal with the registry for the actor, records them on the run's `ActionsRun` (what
  ``invoke`` turns into a `DirectiveResult`), and writes them to the stream as custom parts the chunk adapter
  turns into ``action``/``follow_up`` chunks (it also keeps the directive lines out of the text chunks).

The run's `ActionsRun` (actor, the caller's ``metadata``, trace id, what the replies proposed) travels in the
run config under `RUN_KEY`; LangGraph keeps ``__``-prefixed keys out of checkpoint metadata, so the actor is
never stored. ``context`` values go to the prompt callable only: never logged, stored or traced.

Trace events: each proposal is an ``action.proposed`` and each validation an ``action.validated`` event to the
run's ``on_trace`` sink (`ai_utils._run.record.emit_trace`; action ids, status and reason, never the params).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from ai_utils._run.record import TraceEventType, current_record, emit_trace
from ai_utils.exceptions import UserError
from ai_utils.gateway.actions._directives import DirectiveResult, parse_assistant_directives
from ai_utils.gateway.actions._prompt import render_actions_prompt
from ai_utils.gateway.actor import Actor, to_actor
from ai_utils.streaming._directives import directive_part

if TYPE_CHECKING:
    from ai_utils.gateway.actions import ActionRegistry, ValidatedAction

__all__ = ["RUN_KEY", "ActionsMiddleware", "ActionsRun", "PromptFunction", "TraceSeam", "check_max_actions", "start"]

RUN_KEY = "__ai_utils_actions_run"
"""``config["configurable"]`` key of the run's `ActionsRun` (``__``: LangGraph keeps it out of checkpoints)."""

PromptFunction = Callable[[Mapping[str, Any]], str]
"""``prompt(input) -> str`` with ``input = {"messages", "context", "actor", "metadata"}``."""

TraceSeam = Callable[[str, Mapping[str, Any]], None]
"""``trace(type, data)``: where ``Agent(on_trace=...)`` hooks in for ``action.proposed``/``action.validated``."""


def _emit(type: str, data: Mapping[str, Any]) -> None:
    """Send a trace event to the running run's `RunRecord` (no record: a graph driven by hand, nothing to do)."""
    try:
        record = current_record(get_config())
    except RuntimeError:
        return
    if record is not None:
        emit_trace(record, cast("TraceEventType", type), dict(data))


@dataclass(slots=True)
class ActionsRun:
    """One run of an actions agent: who asked, and what its replies proposed."""

    actor: Actor | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    trace_id: str = ""
    model: str = ""
    usage: dict[str, int] | None = None
    message: str = ""
    actions: list[ValidatedAction] = field(default_factory=list)
    follow_ups: list[str] = field(default_factory=list)
    parse_errors: list[str] = field(default_factory=list)
    proposed: int = 0  # proposals counted so far (the max_actions budget is per run)

    def result(self) -> DirectiveResult:
        """The run's `DirectiveResult`: the last reply's visible text and everything the replies proposed."""
        return DirectiveResult(
            message=self.message,
            actions=list(self.actions),
            follow_ups=list(self.follow_ups),
            parse_errors=list(self.parse_errors),
            trace_id=self.trace_id,
            model=self.model,
            usage=dict(self.usage) if self.usage is not None else None,
        )

    def add_usage(self, message: AIMessage) -> None:
        """Sum a reply's token usage into the run's."""
        usage = message.usage_metadata
        if usage is None:
            return
        total = self.usage or {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        total["input_tokens"] += usage["input_tokens"]
        total["output_tokens"] += usage["output_tokens"]
        total["total_tokens"] += usage["total_tokens"]
        self.usage = total


def check_max_actions(max_actions: Any) -> int | None:
    """``max_actions`` when it is an int >= 0 or ``None`` (no cap); else `UserError`."""
    if max_actions is None or (isinstance(max_actions, int) and not isinstance(max_actions, bool) and max_actions >= 0):
        return max_actions
    raise UserError(f"max_actions must be an int >= 0 (or None for no cap), got {max_actions!r}; e.g. max_actions=3.")


def start(actor: Any, config: RunnableConfig | None, trace_id: str) -> tuple[ActionsRun, RunnableConfig]:
    """A run's `ActionsRun` and the caller's ``config`` carrying it.

    Args:
        actor: the ``actor=`` of the call (an `Actor` or a mapping).
        config: the caller's LangChain config, if any (never changed).
        trace_id: the run's trace id (its `RunRecord`'s: one id per run in trace events, audit rows and the
            `DirectiveResult`; the run path makes it the root run id).

    Returns:
        The run and the config to run with.
    """
    if config is not None and not isinstance(config, Mapping):
        # Not a config: the run's own checks refuse it with their message (`merge_run_config`).
        return ActionsRun(actor=to_actor(actor), trace_id=trace_id), config
    merged: dict[str, Any] = dict(config or {})
    metadata = merged.get("metadata")
    run = ActionsRun(
        actor=to_actor(actor),
        metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
        trace_id=trace_id,
    )
    merged["configurable"] = {**(merged.get("configurable") or {}), RUN_KEY: run}
    return run, RunnableConfig(**merged)  # type: ignore[typeddict-item]


def _current_run() -> ActionsRun:
    """The running call's `ActionsRun`; a run started elsewhere (a durable session's turn) gets a fresh one."""
    try:
        run = (get_config().get("configurable") or {}).get(RUN_KEY)
    except RuntimeError:
        run = None
    return run if isinstance(run, ActionsRun) else ActionsRun()


def _replies(response: Any) -> list[BaseMessage]:
    if isinstance(response, AIMessage):
        return [response]
    inner = getattr(response, "model_response", response)
    return list(getattr(inner, "result", []))


class ActionsMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Dynamic system prompt and directive validation for `Agent` (see the module docstring)."""

    def __init__(
        self,
        *,
        prompt: PromptFunction | None,
        registry: ActionRegistry | None,
        max_actions: int | None,
        model: str,
    ) -> None:
        super().__init__()
        self.prompt = prompt
        self.registry = registry
        self.max_actions = max_actions
        self.model = model
        self.trace: TraceSeam = _emit

    @property
    def name(self) -> str:
        """Middleware name (unique in the stack)."""
        return "ai_utils.ActionsMiddleware"

    # --- before the model call ---------------------------------------------------------------------------

    def _prompt_text(self, request: ModelRequest, run: ActionsRun) -> str | None:
        if self.prompt is None:
            return None
        inputs = {
            "messages": list(request.messages),
            "context": request.runtime.context,
            "actor": run.actor,
            "metadata": dict(run.metadata),
        }
        text = self.prompt(inputs)
        if not isinstance(text, str):
            raise UserError(
                f"The `prompt` function returned {type(text).__name__}, not a str. Return the system prompt text."
            )
        return text

    def _prepare(self, request: ModelRequest) -> tuple[ModelRequest, ActionsRun]:
        run = _current_run()
        parts = [self._prompt_text(request, run)]
        if request.system_message is not None:
            parts.append(request.system_message.text)
        if self.registry is not None:
            parts.append(render_actions_prompt(self.registry.available(run.actor), max_actions=self.max_actions))
            request.runtime.stream_writer(directive_part("start"))
        text = "\n\n".join(p for p in parts if p)
        return request.override(system_message=SystemMessage(text) if text else None), run

    # --- after it ----------------------------------------------------------------------------------------

    def _record(self, response: Any, run: ActionsRun, request: ModelRequest) -> None:
        for reply in _replies(response):
            if not isinstance(reply, AIMessage):
                continue
            run.add_usage(reply)
            metadata = reply.response_metadata
            run.model = str(metadata.get("model_name") or metadata.get("model") or run.model or self.model)
            if self.registry is not None:
                self._directives(reply.text, run, request)

    def _directives(self, text: str, run: ActionsRun, request: ModelRequest) -> None:
        assert self.registry is not None
        budget = None if self.max_actions is None else max(self.max_actions - run.proposed, 0)
        parsed = parse_assistant_directives(text, max_actions=budget)
        run.message = parsed.text
        run.parse_errors.extend(parsed.parse_errors)
        write = request.runtime.stream_writer
        for proposal in parsed.actions:
            run.proposed += 1
            self.trace("action.proposed", {"id": proposal.id})
            validated = self.registry.validate(proposal, run.actor)
            self.trace(
                "action.validated",
                {"id": validated.id, "status": validated.status, "reason": validated.reason},
            )
            run.actions.append(validated)
            write(directive_part("action", id=validated.id, status=validated.status, params=validated.params))
        for text_ in parsed.follow_ups:
            run.follow_ups.append(text_)
            write(directive_part("follow_up", text=text_))

    # --- the hook ----------------------------------------------------------------------------------------

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        """Call the model with this run's system prompt; validate the directives of its reply."""
        prepared, run = self._prepare(request)
        response = handler(prepared)
        self._record(response, run, prepared)
        return response

    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Coroutine[Any, Any, Any]:
        """Async twin of `wrap_model_call` (a plain method: see `ai_utils._run.hooks`)."""
        prepared, run = self._prepare(request)
        return self._after(handler(prepared), run, prepared)

    async def _after(self, pending: Awaitable[Any], run: ActionsRun, request: ModelRequest) -> Any:
        response = await pending
        self._record(response, run, request)
        return response
