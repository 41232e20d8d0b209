"""`Wrapper`: what every graph wrapper's constructor does the same way (`Agent`, `DeepAgent`), in one place.

A wrapper's ``__init__`` rejects unknown keywords, checks its own options, then calls these steps in order:

1. `Wrapper._setup_tools`: ``tools`` (plain functions, a `ToolRegistry`) -> `BaseTool`s, MCP servers checked,
   and the ``mcp`` extra imported now rather than mid-run.
2. `Wrapper._setup_thread`: the checkpointer (or the one a durable session store brings, with its middleware
   as the thread-repair step), "approval (``interrupt_on``) needs a checkpointer", ``interrupt_on`` checked,
   durability.
3. `Wrapper._setup_run`: name, description, ``context_schema``, callbacks, the mode router.
4. `Wrapper._setup_model`: ``prompt`` and ``output`` checked, the run guards, the chat model resolved (last:
   ``llm=None`` reads the environment).
5. `Wrapper._setup_tool_loop`: the tool-loop middleware (`ai_utils._run.toolloop`: tool errors, writers alone,
   loop limits, ``on_trace``), which the wrapper puts first in its stack.

Durable sessions and modes live in rooms below this one (``sessions/``, ``routing/``), so the wrapper imports
them and hands their pieces in: the `Sessions` link from ``ai_utils.sessions._attach.attach``, and the mode
middleware it appends to ``_mode_middleware``. Then it builds its graph with `GraphRunner._compile`.
`WrapperOptions` types the options all wrappers share, for the constructor overloads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain.agents.middleware import InterruptOnConfig
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Durability
from pydantic import BaseModel
from typing_extensions import TypedDict

from ai_utils._run.args import check_approval_saver, check_prompt, mcp_servers, resolve_llm, tool_list
from ai_utils._run.calls import input_guards
from ai_utils._run.durable import Sessions
from ai_utils._run.guards import guards
from ai_utils._run.hitl import to_interrupt_on
from ai_utils._run.repair import ThreadRepair
from ai_utils._run.runner import GraphRunner, OutputT
from ai_utils._run.toolloop import FollowupToolChoice, ToolCalls, ToolErrors, ToolLoop, ToolLoopOptions
from ai_utils.exceptions import UserError
from ai_utils.tools._mcp_config import MCPServer, describe_mcp_servers
from ai_utils.tools._normalize import normalize_tools

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.types import Checkpointer

    from ai_utils._run.record import TraceSink
    from ai_utils.tools.registry import ToolRegistry

__all__ = ["Wrapper", "WrapperOptions"]


class WrapperOptions(TypedDict, total=False):
    """The constructor options every graph wrapper takes (each wrapper's docstring says what they do)."""

    llm: BaseChatModel | str | None
    tools: Sequence[BaseTool | Callable[..., Any]] | ToolRegistry
    checkpointer: Checkpointer
    mcp_server: MCPServer | Sequence[MCPServer] | Mapping[str, Any] | None
    interrupt_on: Mapping[str, Any] | None
    middleware: Sequence[Any]
    describe: str | None
    name: str | None
    context_schema: type[Any] | None
    callbacks: Sequence[BaseCallbackHandler]
    retries: int
    tool_errors: ToolErrors
    parallel_tools: bool
    on_trace: TraceSink | None
    # ``modes`` and ``sessions`` are typed by each wrapper: their types live in rooms below this one; ``prompt``
    # too, as each wrapper takes its own forms (a str or a list of str; `Agent` also a function).


class Wrapper(GraphRunner[OutputT]):
    """`GraphRunner` plus the constructor steps and properties the graph wrappers share."""

    # How to get a checkpointer, for the "approval needs a checkpointer" message.
    _saver_hint = "Pass `checkpointer=MemorySaver()` (or sqlite_saver(...))."
    # Set by a wrapper with context_trust="enforce" (guard/ is a room below this one): the system prompt's rule.
    _trust_instruction: str | None = None

    def _setup_tools(self, tools: Any, mcp_server: Any) -> None:
        """``tools`` as `BaseTool`s (`UserError` for ``None`` or a function without a docstring), MCP servers."""
        self._tools = normalize_tools(tool_list(tools, owner=self._owner))
        self._servers = mcp_servers(mcp_server)

    def _setup_thread(
        self, checkpointer: Any, sessions: Sessions | None, interrupt_on: Any, durability: Durability = "sync"
    ) -> None:
        """After `_setup_tools`: a durable session store is checked against the tools it would run."""
        self._sessions_link = sessions
        self.sessions = sessions.store if sessions is not None else None
        if sessions is not None:
            checkpointer = sessions.checkpointer(checkpointer)
            # The session middleware is the repair step (a ThreadRepair that also lets steers join the turn).
            self._repair: list[Any] = [sessions.middleware(self._tools, self._servers)]
        else:
            self._repair = [ThreadRepair()]
        self.checkpointer = self._saver(checkpointer)
        check_approval_saver(interrupt_on, self.checkpointer, self._saver_hint)
        self._interrupt_on: dict[str, bool | InterruptOnConfig] | None = (
            to_interrupt_on(interrupt_on) if interrupt_on else None
        )
        self._gated = tuple(self._interrupt_on or ())
        # LangGraph warns (and its sync loop breaks) when a durability is given without a checkpointer.
        self._durability = durability if self.checkpointer is not None else None

    def _saver(self, checkpointer: Any) -> Any:
        """The checkpointer the graph gets for the ``checkpointer=`` value (a wrapper may map shorthands)."""
        return checkpointer

    def _setup_run(
        self, name: str | None, describe: str | None, context_schema: Any, callbacks: Any, modes: Any
    ) -> None:
        """The plain options every run reads (``modes``: the wrapper adds its middleware)."""
        self.name = name
        self.describe = describe
        self.context_schema = context_schema
        self.callbacks = list(callbacks)
        self.modes = modes
        # The wrapper adds the mode router's middleware: routing/ is a room below this one.
        self._mode_middleware: list[Any] = []

    def _setup_model(self, llm: Any, prompt: Any, output: Any, retries: int) -> None:
        """``prompt`` and ``output`` checked, the run guards (innermost middleware), the chat model."""
        self.prompt = check_prompt(prompt, owner=self._owner)
        if output is not None and not (isinstance(output, type) and issubclass(output, BaseModel)):
            raise UserError(f"`output` must be a pydantic model class, got {output!r}.")
        self.output = output
        self.retries = retries
        self._guards = guards(output, retries)
        self.llm = resolve_llm(llm, owner=self._owner)

    def _setup_tool_loop(
        self,
        *,
        tool_errors: Any,
        parallel_tools: Any,
        on_trace: Any,
        max_iterations: Any = None,
        decide_followup_tool_choice: FollowupToolChoice | None = None,
        model_hook: bool = True,
    ) -> None:
        """After `_setup_model`: the tool-loop middleware as ``self._tool_loop`` (`UserError` for a bad option).

        Args:
            tool_errors: ``"model"`` or ``"raise"``.
            parallel_tools: ``False`` runs every tool call alone.
            on_trace: the trace sink, or ``None``.
            max_iterations: tool rounds before the model must answer (``None``: no limit).
            decide_followup_tool_choice: ``tool_choice`` for each follow-up model call.
            model_hook: ``False`` when the wrapper runs its model-call part on a model-call hook it has anyway
                (`Agent`: the repair step's, as a `CallStep`).
        """
        if on_trace is not None and not callable(on_trace):
            raise UserError(
                f"{self._owner}(on_trace=...) must be a function of one AgentTraceEvent (sync or async), got "
                f"{on_trace!r}."
            )
        self._on_trace = on_trace
        options = ToolLoopOptions.checked(
            owner=self._owner,
            tool_errors=tool_errors,
            parallel_tools=parallel_tools,
            max_iterations=max_iterations,
            decide_followup_tool_choice=decide_followup_tool_choice,
            writes_default=self._writes_default(),
        )
        self.tool_errors = options.tool_errors
        self.parallel_tools = options.parallel_tools
        self._tool_loop: ToolCalls = (ToolLoop if model_hook else ToolCalls)(options, self.llm)

    def _writes_default(self) -> Any:
        """With durable sessions a tool whose metadata does not say ``writes`` writes unless it is idempotent."""
        is_idempotent = getattr(self._repair[0], "is_idempotent", None) if self._sessions_link is not None else None
        if is_idempotent is None:
            return None

        def writes(name: str, tool: BaseTool | None) -> bool:
            call: Any = {"name": name, "args": {}, "id": None, "type": "tool_call"}
            return not is_idempotent(ToolCallRequest(tool_call=call, tool=tool, state={}, runtime=cast("Any", None)))

        return writes

    def _setup_input_guards(self, middleware: Sequence[Any]) -> None:
        """The user's middleware that see each input before the run stores it (e.g. guardrails)."""
        self._input_guards = input_guards(middleware)

    @property
    def system_prompt(self) -> str | None:
        """Our system prompt: ``prompt`` plus the MCP servers' descriptions (deepagents appends its own part)."""
        parts = [p for p in (self.prompt, describe_mcp_servers(self._servers), self._trust_instruction) if p]
        return "\n\n".join(parts) or None

    @property
    def tools(self) -> list[BaseTool]:
        """The agent's own tools (without MCP tools, which are loaded per run, or built-in ones)."""
        return list(self._tools)
