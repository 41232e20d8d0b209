"""`Agent`: a tool-using agent on `langchain.agents.create_agent`, with memory, approval and one stream protocol."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Never, cast, overload

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import Durability
from pydantic import BaseModel
from typing_extensions import TypeVar, Unpack

from ai_utils._run.args import check_store, keyword_names, reject_unknown
from ai_utils._run.calls import (
    Interrupt,
    ModelT,
    RunCall,
    RunInput,
    RunOptions,
    RunResult,
    StreamOptions,
    chunk_adapter,
)
from ai_utils._run.hitl import hitl_middleware
from ai_utils._run.record import AgentRun
from ai_utils._run.repair import ModelCallRepair
from ai_utils._run.runner import Graph
from ai_utils._run.setup import Wrapper, WrapperOptions
from ai_utils._run.state import AgentState
from ai_utils._run.toolloop import FollowupToolChoice, ToolErrors
from ai_utils.agents._actions import ActionsMiddleware, ActionsRun, PromptFunction, check_max_actions, start
from ai_utils.agents._hooks import AfterToolCall, BeforeToolCall, OnProviderError, ShouldBreakEarly, ToolLoopHooks
from ai_utils.client import StreamChunk
from ai_utils.exceptions import UserError
from ai_utils.guard._trust import TRUST_INSTRUCTION, context_trust_middleware
from ai_utils.tools._mcp_config import MCPServer

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.store.base import BaseStore
    from langgraph.types import Checkpointer
    from opentelemetry.trace import TracerProvider

    from ai_utils._run.record import TraceSink
    from ai_utils.gateway.actions import ActionRegistry, DirectiveResult
    from ai_utils.routing.modes import ModeRouter
    from ai_utils.sessions._content import ImageResizer
    from ai_utils.sessions._store import SessionStore
    from ai_utils.tools.registry import ToolRegistry

__all__ = ["Agent", "AgentOptions"]

# What ``invoke`` answers besides an interrupt; a bare ``Agent`` annotation means any of them (covariant).
OutputT = TypeVar(
    "OutputT", bound="str | BaseModel | DirectiveResult", covariant=True, default="str | BaseModel | DirectiveResult"
)


class AgentOptions(WrapperOptions, total=False):
    """The `Agent` constructor options besides ``output`` and ``actions`` (which pick the answer type)."""

    prompt: str | Sequence[str] | PromptFunction | None
    max_actions: int | None
    before_tool_call: BeforeToolCall | None
    after_tool_call: AfterToolCall | None
    should_break_early: ShouldBreakEarly | None
    on_provider_error: OnProviderError | None
    max_iterations: int | None
    decide_followup_tool_choice: FollowupToolChoice | None
    durability: Durability
    modes: ModeRouter | None
    sessions: SessionStore | None
    resize_image: ImageResizer | None
    on_event: Callable[[dict[str, Any]], Any] | None
    store: BaseStore | None
    context_trust: Literal["enforce", "off"]


class Agent(Wrapper[OutputT]):
    """A tool-calling agent: the model calls tools until it can answer.

    Example:
        ```python
        agent = Agent(llm=get_llm(), prompt="Use tools when useful.", tools=registry.all_tools)
        print(agent.invoke("What is 8 + 13?"))
        for chunk in agent.stream("And 2 + 2?", show_tool_calls=True):
            log_chunk(chunk)
        ```

    Args:
        llm: the chat model; defaults to `ai_utils.get_llm()`; a ``"provider:model"`` string is
            ``get_llm(provider, model)``.
        prompt: the system prompt.
        tools: `BaseTool`s (e.g. ``ToolRegistry(...).all_tools``) and plain functions with docstrings, or a
            `ToolRegistry` (all its tools).
        checkpointer: keeps each thread's conversation (``MemorySaver()``, ``sqlite_saver(path)``, ...);
            every call then needs a ``thread_id``.
        output: a pydantic model; ``invoke`` then returns a validated instance. A final answer that does not
            validate is sent back with the error up to ``retries`` times, then `ModelOutputError` is raised.
        retries: extra model calls for a final answer that fails ``output`` validation (as `Chain`).
        mcp_server: one or more `MCPServer`s; one connection per run, held for the whole run. Their
            ``description`` goes into the system prompt and their tools are named ``<server>__<tool>``.
        interrupt_on: tools that need human approval:
            ``{"send_mail": {"decisions": ["approve", "reject"], "question": "Send it?"}}`` (needs a checkpointer).
        middleware: more `create_agent` middleware, run before ours.
        describe: what the agent is for (metadata only; not sent to the model).
        name: the agent's name (graph name and stream metadata).
        before_tool_call: ``(name, args) -> args | None | False``: change the args, keep them, or block the call.
        after_tool_call: ``(name, result)``, called after each tool.
        should_break_early: ``(iteration) -> bool``, asked before each further model call.
        on_provider_error: ``(error, iteration)``, called when a model call fails (the error still propagates).
        max_iterations: after this many model calls of a turn that asked for tools (default 5), the next call
            gets ``tool_choice="none"`` and must answer (a tool call in that answer is dropped); ``None`` lifts
            the limit. The count is kept on the stored turn: a resumed or continued turn carries it on.
        decide_followup_tool_choice: ``(iteration, messages) -> "auto" | "required" | "none" | <tool name>``
            (or ``None`` to leave it), asked before each model call that follows a tool round (``iteration``:
            the tool rounds so far) and sent as that call's ``tool_choice``; another value is a `UserError`.
        tool_errors: ``"model"`` (default): an ``Exception`` a tool raises reaches the model as a failed tool
            result ``"<ExceptionClass>: <message>"`` (secret shapes and ``context`` values redacted, at most
            2,000 characters; the stream's tool ``end`` chunk has ``"status": "error"``) and the run goes on;
            ``"raise"``: the exception ends the run.
        parallel_tools: ``True`` (default): the calls of one model reply run in reply order, calls of tools that
            do not write at the same time, and a call of a tool with ``writes=True`` (`durable_tool`,
            ``tool.metadata["writes"]``, the ToolRegistry key ``writes``; with sessions: every tool that is not
            idempotent) alone. ``False``: every call alone.
        on_trace: ``fn(AgentTraceEvent)`` (sync or async) for each step of a run: ``started``,
            ``model.requested``, ``model.responded``, ``tool.started``, ``tool.finished``, ``completed``,
            ``failed``. A sink that raises is logged and never fails the run.
        callbacks: LangChain callback handlers for every run, e.g. ``[gateway.callback("support", actor=user)]``;
            ``invoke``/``stream`` take more per call.
        actions: an `ActionRegistry`: the answer's ``!>`` action directives are validated against it (for the
            ``actor`` of each call) and ``invoke`` returns a `DirectiveResult` (visible text, validated actions
            with status allowed / requires_confirmation / blocked, ``?>`` follow-ups) instead of the text.
        context_schema: the type of ``context`` (a dataclass, TypedDict or pydantic model) that tools and
            middleware read via their runtime; ``context`` itself is never stored in checkpoints.
        durability: when checkpoints are written: ``"sync"`` (default: each step is stored before the next
            starts, so a crash loses nothing), ``"async"`` or ``"exit"`` (LangGraph's modes).
        sessions: a durable session store (``sqlite_sessions(path)``, ``postgres_sessions(...)``,
            ``memory_sessions()``; SPEC §14): ``agent.session()`` then gives conversations whose turns outlive
            the process. It brings its own checkpointer; every tool must declare ``idempotent``
            (`durable_tool`). Sessions belong to the agent's ``name`` (``"default"`` without one).
        tracer_provider: an OpenTelemetry ``TracerProvider``: this agent's runs emit GenAI spans to it
            (``invoke_agent``, ``chat``, ``execute_tool``; see `ai_utils.otel`; extra ``otel``).
        resize_image: with ``sessions``: ``fn(data: bytes, mime_type: str) -> (bytes, mime_type)`` (sync or async),
            run on every prompt image before it is stored (downscale or convert; what it raises fails that
            ``prompt()`` and nothing is stored).
        on_event: with ``sessions``: ``fn(event: dict)`` (sync or async) gets diagnostics apart from the stream
            (``turn.accepted``, ``turn.started``, ``turn.resumed``, ``turn.ended``, ``lease.acquired``,
            ``lease.lost``, ``model.request``, ``model.retry``, ``checkpoint.mismatch``); never a credential, a
            ``context`` value or message content.
        modes: a mode router (``KeywordModeRouter(...)``): each turn's user message picks a mode; the model then
            sees only that mode's tools and the mode instruction, a call to another tool is refused, and the turn
            gets at most the mode's ``max_tool_iterations`` tool rounds. ``stream(show_tool_calls=True)`` starts
            with ``{"kind": "mode", "mode", "tools"}``.
        store: a LangGraph `BaseStore` for memory across threads (e.g. a `MemoryItemStore`'s store, SPEC §22);
            tools reach it as ``runtime.store``.
        context_trust: ``"enforce"`` wraps every tool result (MCP, RAG, memory and fetched pages included) as a
            data block (`trust_segment`) in the history and tells the model such blocks are not instructions;
            the checkpoint keeps the wrapped form, the stream shows the original. Default ``"off"``.

    Raises:
        UserError: for duplicate tool names, approval without a checkpointer, a bad ``output`` or MCP config,
            a bad ``llm``/``prompt``/``tools`` value, or an unknown keyword argument.

    Without a checkpointer nothing is remembered between calls; a ``thread_id`` passed anyway is ignored
    with a one-time `UserWarning`.

    ``Agent(output=Model)`` is an ``Agent[Model]`` whose ``invoke`` returns ``Model | Interrupt``; with
    ``actions`` it is an ``Agent[DirectiveResult]``; otherwise an ``Agent[str]``.
    """

    @overload
    def __init__(
        self: Agent[str], *, output: None = None, actions: None = None, **options: Unpack[AgentOptions]
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[ModelT], *, output: type[ModelT], actions: None = None, **options: Unpack[AgentOptions]
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[DirectiveResult], *, output: None = None, actions: ActionRegistry, **options: Unpack[AgentOptions]
    ) -> None: ...

    def __init__(
        self,
        *,
        llm: BaseChatModel | str | None = None,
        prompt: str | Sequence[str] | PromptFunction | None = None,
        tools: Sequence[BaseTool | Callable[..., Any]] | ToolRegistry = (),
        checkpointer: Checkpointer = None,
        output: type[BaseModel] | None = None,
        mcp_server: MCPServer | Sequence[MCPServer] | Mapping[str, Any] | None = None,
        interrupt_on: Mapping[str, Any] | None = None,
        middleware: Sequence[Any] = (),
        describe: str | None = None,
        name: str | None = None,
        before_tool_call: BeforeToolCall | None = None,
        after_tool_call: AfterToolCall | None = None,
        should_break_early: ShouldBreakEarly | None = None,
        on_provider_error: OnProviderError | None = None,
        max_iterations: int | None = 5,
        decide_followup_tool_choice: FollowupToolChoice | None = None,
        tool_errors: ToolErrors = "model",
        parallel_tools: bool = True,
        on_trace: TraceSink | None = None,
        durability: Durability = "sync",
        context_schema: type[Any] | None = None,
        callbacks: Sequence[BaseCallbackHandler] = (),
        actions: ActionRegistry | None = None,
        max_actions: int | None = 3,
        modes: ModeRouter | None = None,
        retries: int = 2,
        sessions: SessionStore | None = None,
        tracer_provider: TracerProvider | None = None,
        resize_image: ImageResizer | None = None,
        on_event: Callable[[dict[str, Any]], Any] | None = None,
        store: BaseStore | None = None,
        context_trust: Literal["enforce", "off"] = "off",
        **unknown: Never,
    ) -> None:
        reject_unknown(unknown, owner="Agent", known=keyword_names(Agent.__init__))
        if tracer_provider is not None:
            from ai_utils.otel._instrument import provider_tracer

            # Spans from the run path's tracing slot, not a callback handler (ai_utils._run.tracing says why).
            self._tracer = provider_tracer(tracer_provider)
        if actions is not None and output is not None:
            raise UserError(
                "`actions` reads `!>` directives from the answer text; it cannot be combined with `output`."
            )
        if max_actions != 3 and actions is None:
            raise UserError(
                f"max_actions={max_actions!r} caps action proposals; it needs `actions=ActionRegistry(...)`."
            )
        self.max_actions = check_max_actions(max_actions)
        prompt_fn = prompt if callable(prompt) else None
        self._setup_tools(tools, mcp_server)
        link = None
        if sessions is not None:
            from ai_utils.sessions._attach import attach

            link = attach("Agent", sessions, resize_image=resize_image, on_event=on_event)
        elif resize_image is not None or on_event is not None:
            raise UserError("`resize_image` and `on_event` belong to durable sessions: pass them with `sessions=`.")
        self._setup_thread(checkpointer, link, interrupt_on, durability)
        self._setup_run(name, describe, context_schema, callbacks, modes)
        self._setup_model(llm, None if prompt_fn is not None else prompt, output, retries)
        self._setup_input_guards(middleware)
        with_sessions = self.sessions is not None
        if with_sessions:
            # The session's hooks without a before_model node of their own: steers join in its model-call hook
            # (outermost but the tool loop, so the user's hooks see them) and the repair step stores them.
            self._repair[0] = self._repair[0].parts()
        # The tool loop's model-call part rides on the repair step's hook (one hook less).
        self._setup_tool_loop(
            tool_errors=tool_errors,
            parallel_tools=parallel_tools,
            on_trace=on_trace,
            max_iterations=max_iterations,
            decide_followup_tool_choice=decide_followup_tool_choice,
            model_hook=False,
        )
        self.max_iterations = max_iterations
        self.durability = durability
        self.actions = actions
        self.store = check_store(store, owner="Agent")
        trust = context_trust_middleware(context_trust, owner="Agent")
        self.context_trust = context_trust
        self._trust_instruction = TRUST_INSTRUCTION if trust else None
        # The system prompt per model call (a prompt function, the actor's actions) and the directives' check.
        self._actions_step = (
            ActionsMiddleware(
                prompt=prompt_fn,
                registry=actions,
                max_actions=self.max_actions,
                model=str(getattr(self.llm, "model_name", None) or getattr(self.llm, "model", "") or ""),
            )
            if actions is not None or prompt_fn is not None
            else None
        )
        # The repair step is attached to the model call, innermost but for the run guards: no graph node of its
        # own, and outer hooks' commands land after its rewrite (_run/repair.py). The mode router rides on that
        # hook too (one hook per model call costs LangChain ~40 µs). With sessions the session's hooks come first
        # after the tool loop.
        mode_step = None
        if modes is not None:
            from ai_utils.routing._middleware import ModeMiddleware

            mode_step = ModeMiddleware(modes)
            self._start_hook = mode_step.start  # the turn's mode is decided once, from its input
        # The tool loop first: a call takes its place in its reply's order before any middleware may answer it.
        # Context trust wraps tool results outermost but for the session step, so it wraps what they end as.
        stack = [
            self._tool_loop,
            *(self._repair if with_sessions else ()),
            *trust,
            # Outermost but for the session step and trust: user middleware inside it sees (and may extend) its prompt.
            *((self._actions_step,) if self._actions_step is not None else ()),
            *middleware,
        ]
        hook_fns = (before_tool_call, after_tool_call, should_break_early, on_provider_error)
        if any(fn is not None for fn in hook_fns):
            stack.append(
                ToolLoopHooks(
                    before_tool_call=before_tool_call,
                    after_tool_call=after_tool_call,
                    should_break_early=should_break_early,
                    on_provider_error=on_provider_error,
                )
            )
        if interrupt_on:
            stack.append(hitl_middleware(interrupt_on))
        stack.append(ModelCallRepair(mode_step, self._tool_loop))
        stack.extend(self._guards)
        self._middleware = stack
        # Without MCP the graph is compiled once; with MCP servers the first run builds it with their tools.
        self._graph: Graph | None = None if self._servers else self._compile(self._tools)

    # --- building ----------------------------------------------------------------------------------------

    def _build(self, tools: Sequence[BaseTool]) -> Graph:
        return create_agent(
            self.llm,
            list(tools),
            system_prompt=self.system_prompt,
            middleware=self._middleware,
            response_format=self.output,
            state_schema=AgentState,
            checkpointer=self.checkpointer,
            store=self.store,
            context_schema=self.context_schema,
            name=self.name,
        )

    def _call(
        self, method: str, input: Any, actor: Any, options: Mapping[str, Any], config: RunnableConfig | None
    ) -> tuple[RunCall, ActionsRun | None]:
        """The run's `RunCall`; with actions or a prompt function, also its `ActionsRun` (carried in its config)."""
        call = RunCall.of(self._owner, method, input, options, config)
        if self._actions_step is None:
            return call, None
        run, config = start(actor, config, call.record.trace_id)
        return dataclasses.replace(call, config=config), run

    def _result(self, result: RunResult, run: ActionsRun | None) -> OutputT | Interrupt:
        # The overloads tie OutputT to ``output``/``actions``, which decide what the run returns.
        if self.actions is None or run is None or not isinstance(result, str):
            return cast("OutputT | Interrupt", result)
        return cast("OutputT", run.result())

    # --- invoke --------------------------------------------------------------------------------------------

    @overload  # type: ignore[override]  # Runnable's **kwargs: Any, narrowed to the typed run options
    def invoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        actor: Any = None,
        details: Literal[False] = False,
        **options: Unpack[RunOptions],
    ) -> OutputT | Interrupt: ...

    @overload
    def invoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        actor: Any = None,
        details: Literal[True],
        **options: Unpack[RunOptions],
    ) -> AgentRun[OutputT] | Interrupt: ...

    def invoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        actor: Any = None,
        details: bool = False,
        **options: Unpack[RunOptions],
    ) -> OutputT | AgentRun[OutputT] | Interrupt:
        """Run one turn (or resume a paused one) to the end.

        Args:
            input: the user's message (a str, LangChain messages or a prompt value); leave it out to answer a
                pending approval with ``decision``/``decisions`` (``"approve"``, ``"reject"``,
                ``{"type": "edit", "args": {...}}``, ...) or to continue a run.
            config: a LangChain ``RunnableConfig`` (callbacks, tags, metadata, run_name, recursion_limit,
                ``configurable``) merged with ours; its ``configurable.thread_id`` names the thread too.
            actor: who asked (``Actor`` or mapping); with ``actions``, the policy checks their roles and plan.
            details: return an `AgentRun` (the answer, the last model message, model calls, the actions the
                tools proposed, summed usage, model, ``trace_id``) instead of the bare answer; an interrupt is
                still returned as the interrupt.
            **options: ``thread_id`` (required with a checkpointer), ``context`` (never stored), ``decision``,
                ``decisions``, ``callbacks`` (for this run, added to the agent's), ``allowed_tools`` (only these
                tools for this run), ``trace_id`` (the run's id); see `RunOptions`.

        Returns:
            The answer text, the ``output`` model instance, a `DirectiveResult` with ``actions``, or an
            interrupt chunk (``{"kind": "interrupt", ...}``) when a tool waits for approval.
        """
        self._warn_in_loop("invoke")
        call, run = self._call("invoke", input, actor, options, config)
        return self._answered(self._answer(call, self._result(self._invoke(call), run), details))

    @overload  # type: ignore[override]  # see invoke
    async def ainvoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        actor: Any = None,
        details: Literal[False] = False,
        **options: Unpack[RunOptions],
    ) -> OutputT | Interrupt: ...

    @overload
    async def ainvoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        actor: Any = None,
        details: Literal[True],
        **options: Unpack[RunOptions],
    ) -> AgentRun[OutputT] | Interrupt: ...

    async def ainvoke(
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        actor: Any = None,
        details: bool = False,
        **options: Unpack[RunOptions],
    ) -> OutputT | AgentRun[OutputT] | Interrupt:
        """Async twin of `invoke`."""
        call, run = self._call("ainvoke", input, actor, options, config)
        result = self._answer(call, self._result(await self._ainvoke(call), run), details)
        await call.record.flush()
        return self._answered(result)

    def stream(  # type: ignore[override]  # yields our chunks (ai_utils.client), not answers
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        actor: Any = None,
        **options: Unpack[StreamOptions],
    ) -> Iterator[StreamChunk]:
        """Run one turn (or resume one) and yield its chunks as they come (see `GraphRunner.stream`).

        With ``actions`` the text chunks never show directive lines; each validated action is an
        ``{"kind": "action", "id", "status", "params"}`` chunk and each follow-up a ``{"kind": "follow_up",
        "text"}`` chunk, after the text of the reply that proposed them.

        Args:
            input: as for `invoke`.
            config: as for `invoke`.
            actor: who asked; with ``actions`` their actions are offered and the policy checks them.
            **options: as for `invoke`, plus ``show_tool_calls``, ``show_reasoning``, ``show_subagents``.
        """
        call, _ = self._call("stream", input, actor, options, config)
        return self._stream(call, chunk_adapter(options))

    def astream(  # type: ignore[override]  # see stream
        self,
        input: RunInput = None,
        config: RunnableConfig | None = None,
        *,
        actor: Any = None,
        **options: Unpack[StreamOptions],
    ) -> AsyncIterator[StreamChunk]:
        """Async twin of `stream`."""
        call, _ = self._call("astream", input, actor, options, config)
        return self._arun_stream(call, chunk_adapter(options))

    def _output_type(self) -> Any:
        if self.actions is None:
            return super()._output_type()
        from ai_utils.client import InterruptBatch, InterruptEvent
        from ai_utils.gateway.actions import DirectiveResult

        return DirectiveResult | InterruptEvent | InterruptBatch
