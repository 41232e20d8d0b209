"""`DeepAgent`: a planning, file-using agent with subagents on `deepagents.create_deep_agent`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Never, overload

from langchain.agents.middleware import TodoListMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel
from typing_extensions import TypeVar, Unpack

from ai_utils._run.args import keyword_names, reject_unknown, resolve_llm
from ai_utils._run.calls import ModelT
from ai_utils._run.guards import guard_tool
from ai_utils._run.repair import REPAIR_NAME, ThreadRepair
from ai_utils._run.runner import Graph
from ai_utils._run.setup import Wrapper, WrapperOptions
from ai_utils._run.toolloop import ToolCalls, ToolErrors
from ai_utils.deep._deepagents import GENERAL_PURPOSE_SUBAGENT, create_deep_agent, supports_execution
from ai_utils.deep._skills import skills_middleware
from ai_utils.exceptions import UserError
from ai_utils.guard._trust import TRUST_INSTRUCTION, context_trust_middleware
from ai_utils.tools._mcp_config import MCPServer
from ai_utils.tools._normalize import check_unique, normalize_tools

if TYPE_CHECKING:
    from deepagents import AsyncSubAgent, CompiledSubAgent, FilesystemPermission, SubAgent
    from deepagents.backends.protocol import BackendProtocol
    from langchain_core.language_models import BaseChatModel
    from langgraph.store.base import BaseStore
    from langgraph.types import Checkpointer
    from opentelemetry.trace import TracerProvider

    from ai_utils._run.record import TraceSink
    from ai_utils.routing.modes import ModeRouter
    from ai_utils.sessions._content import ImageResizer
    from ai_utils.sessions._store import SessionStore
    from ai_utils.tools.registry import ToolRegistry

__all__ = ["DeepAgent", "DeepAgentOptions"]

# What ``invoke`` answers besides an interrupt; a bare ``DeepAgent`` annotation means either (covariant).
OutputT = TypeVar("OutputT", bound="str | BaseModel", covariant=True, default="str | BaseModel")


def _chat_model(llm: Any) -> Any:
    """A chat model object (see `ai_utils._run.args.resolve_llm`)."""
    return resolve_llm(llm, owner="DeepAgent")


# The names of the slots in deepagents' general-purpose subagent stack that the main agent's middleware may take
# (deepagents' default one inherits main middleware of these names: our repair step or the session's, and skills).
_GENERAL_PURPOSE_SLOTS = frozenset({"FilesystemMiddleware", "SummarizationMiddleware", REPAIR_NAME, "SkillsMiddleware"})


def _subagent(spec: Any, loop: Callable[[Any], list[Any]]) -> Any:
    """A subagent spec as deepagents takes it: a ``"model"`` string resolved; a declared one gets our stack.

    Args:
        spec: the user's spec.
        loop: fresh tool-loop (and trust) middleware for a subagent running this chat model.
    """
    if isinstance(spec, Mapping) and isinstance(spec.get("model"), str):
        spec = {**spec, "model": _chat_model(spec["model"])}
    if isinstance(spec, Mapping) and "runnable" not in spec and "graph_id" not in spec:
        # A declared subagent runs its tools in its own stack: the same tool loop and context trust as the main
        # agent (merged after deepagents' core entries, outermost among ours), and our repair step takes
        # deepagents' slot there too (merged by name).
        ours = loop(spec.get("model"))
        names = {m.name for m in ours} | {REPAIR_NAME}
        own = [m for m in spec.get("middleware", ()) if getattr(m, "name", None) not in names]
        spec = {**spec, "middleware": [*ours, *own, ThreadRepair()]}
    return spec


class DeepAgentOptions(WrapperOptions, total=False):
    """The `DeepAgent` constructor options besides ``output`` (which picks the answer type), in deepagents' types."""

    prompt: str | Sequence[str] | None
    backend: BackendProtocol | None
    permissions: Sequence[FilesystemPermission] | None
    agents_md: Sequence[str] | None
    subagents: Sequence[SubAgent | CompiledSubAgent | AsyncSubAgent] | None
    skills: Sequence[str] | None
    store: BaseStore | None
    modes: ModeRouter | None
    sessions: SessionStore | None
    resize_image: ImageResizer | None
    on_event: Callable[[dict[str, Any]], Any] | None
    context_trust: Literal["enforce", "off"]


class DeepAgent(Wrapper[OutputT]):
    """A deep agent: plans with ``write_todos``, works in files, delegates to subagents via ``task``.

    Example:
        ```python
        agent = DeepAgent(
            llm=get_llm(),
            prompt="You are a careful coder.",
            backend=create_workspace_backend("./site", route="/workspace/"),
            permissions=workspace_permissions("/workspace/"),
            interrupt_on={"write_file": {"decisions": ["approve", "edit", "reject"], "question": "Write it?"}},
        )
        result = agent.invoke("Build an index.html", thread_id="t1")
        if is_interrupt(result):
            agent.invoke(thread_id="t1", decision="approve")
        ```

    Args:
        prompt: the system prompt, or a list of prompt parts (joined with blank lines); deepagents adds its tool
            instructions after it.
        llm: the chat model object; defaults to `ai_utils.get_llm()`; a ``"provider:model"`` string is
            ``get_llm(provider, model)``. Subagents use it too unless they name their own (a subagent's
            ``"model"`` string is resolved the same way).
        tools: `BaseTool`s and plain functions with docstrings (or a `ToolRegistry`), next to the built-in file
            tools.
        output: a pydantic model; ``invoke`` then returns a validated instance. A final answer that does not
            validate is sent back with the error up to ``retries`` times, then `ModelOutputError` is raised.
        retries: extra model calls for a final answer that fails ``output`` validation (as `Chain`).
        checkpointer: ``True`` (default) keeps threads in memory; pass a saver (``sqlite_saver(path)``) to
            survive restarts, or ``None``/``False`` for none. With one, every call needs a ``thread_id``.
        backend: where the file tools work, an instance (``create_state_backend()``, default: files live in
            the thread's state under ``files``).
        permissions: deepagents ``FilesystemPermission`` rules (e.g. ``workspace_permissions("/workspace/")``).
        interrupt_on: tools that need human approval:
            ``{"write_file": {"decisions": ["approve", "edit", "reject"], "question": "Write it?"}}``.
        agents_md: paths of AGENTS.md files on the backend, loaded as memory.
        subagents: subagent specs (``{"name", "description", "system_prompt", ...}``) for the ``task`` tool.
        skills: skills on the backend: a skill's ``SKILL.md`` path or folder (that skill), or a folder holding
            ``<skill>/SKILL.md`` folders (all of them). An entry that gives no skill is a `UserError` (at
            construction when the backend can be read then, else at the first run).
        middleware: more middleware, after deepagents' own and the planning middleware.
        store: a LangGraph store (for ``StoreBackend`` and cross-thread memory).
        name: the agent's name (graph name and stream metadata).
        context_schema: the type of ``context`` that tools and middleware read.
        mcp_server: one or more `MCPServer`s, as for `Agent`.
        describe: what the agent is for (metadata only; not sent to the model).
        callbacks: LangChain callback handlers for every run; ``invoke``/``stream`` take more per call.
        tracer_provider: an OpenTelemetry ``TracerProvider`` for this agent's GenAI spans, as for `Agent`.
        sessions: a durable session store, as for `Agent` (SPEC §14); it replaces ``checkpointer``.
        resize_image: with ``sessions``, as for `Agent`.
        on_event: with ``sessions``, as for `Agent`.
        modes: a mode router, as for `Agent`: per turn only the mode's tools (built-in ones included: list
            ``"read_file"``, ``"write_todos"``, ... in ``allowed_tools`` to keep them) and the mode instruction.
        context_trust: ``"enforce"`` wraps every tool result (built-in file tools and ``task`` answers included)
            as a data block in the history, as for `Agent`; in every declared subagent's history too (the default
            general-purpose one and ``subagents`` dicts). Default ``"off"``.
        tool_errors: ``"model"`` (default: a tool's exception reaches the model as a failed result) or
            ``"raise"``, as for `Agent`. A declared subagent runs its tools the same way: its tool's exception
            reaches the subagent's model (``"raise"``: it ends the run). Compiled (``runnable``) and async
            subagents run as they were built.
        parallel_tools: as for `Agent`: writers (``writes=True``; with sessions, tools that are not idempotent)
            run alone; ``False`` runs every call alone. DeepAgent has no ``max_iterations``: deepagents keeps its
            own budget.
        on_trace: a trace sink, as for `Agent`.

    Raises:
        UserError: approval without a checkpointer, a backend class or factory instead of an instance, a bad
            ``output``, duplicate tool names, an ``interrupt_on`` key that names no tool, a bad
            ``llm``/``prompt``/``tools`` value, or an unknown keyword argument.

    With ``checkpointer=None``/``False`` nothing is remembered; a ``thread_id`` passed anyway is ignored with a
    one-time `UserWarning`.

    ``DeepAgent(output=Model)`` is a ``DeepAgent[Model]`` (``invoke`` returns ``Model | Interrupt``), else ``[str]``.
    """

    _owner = "DeepAgent"
    _saver_hint = "Keep the default `checkpointer=True` or pass a saver (e.g. sqlite_saver(...))."

    @overload
    def __init__(self: DeepAgent[str], *, output: None = None, **options: Unpack[DeepAgentOptions]) -> None: ...

    @overload
    def __init__(self: DeepAgent[ModelT], *, output: type[ModelT], **options: Unpack[DeepAgentOptions]) -> None: ...

    def __init__(
        self,
        *,
        prompt: str | Sequence[str] | None = None,
        llm: BaseChatModel | str | None = None,
        tools: Sequence[BaseTool | Callable[..., Any]] | ToolRegistry = (),
        output: type[BaseModel] | None = None,
        checkpointer: Checkpointer = True,
        backend: BackendProtocol | None = None,
        permissions: Sequence[FilesystemPermission] | None = None,
        interrupt_on: Mapping[str, Any] | None = None,
        agents_md: Sequence[str] | None = None,
        subagents: Sequence[SubAgent | CompiledSubAgent | AsyncSubAgent] | None = None,
        skills: Sequence[str] | None = None,
        middleware: Sequence[Any] = (),
        store: BaseStore | None = None,
        name: str | None = None,
        context_schema: type[Any] | None = None,
        mcp_server: MCPServer | Sequence[MCPServer] | Mapping[str, Any] | None = None,
        describe: str | None = None,
        callbacks: Sequence[BaseCallbackHandler] = (),
        modes: ModeRouter | None = None,
        retries: int = 2,
        sessions: SessionStore | None = None,
        tracer_provider: TracerProvider | None = None,
        resize_image: ImageResizer | None = None,
        on_event: Callable[[dict[str, Any]], Any] | None = None,
        context_trust: Literal["enforce", "off"] = "off",
        tool_errors: ToolErrors = "model",
        parallel_tools: bool = True,
        on_trace: TraceSink | None = None,
        **unknown: Never,
    ) -> None:
        reject_unknown(unknown, owner="DeepAgent", known=keyword_names(DeepAgent.__init__))
        if tracer_provider is not None:
            from ai_utils.otel._instrument import provider_tracer

            # Spans from the run path's tracing slot, not a callback handler (ai_utils._run.tracing says why).
            self._tracer = provider_tracer(tracer_provider)
        if backend is not None and (isinstance(backend, type) or not hasattr(backend, "read")):
            raise UserError(
                f"`backend` must be a backend instance, got {backend!r}. "
                "Call the factory, e.g. `backend=create_state_backend()`."
            )
        self._setup_tools(tools, mcp_server)
        link = None
        if sessions is not None:
            from ai_utils.sessions._attach import attach

            link = attach("DeepAgent", sessions, deep=True, resize_image=resize_image, on_event=on_event)
        elif resize_image is not None or on_event is not None:
            raise UserError("`resize_image` and `on_event` belong to durable sessions: pass them with `sessions=`.")
        self._setup_thread(checkpointer, link, interrupt_on)
        self._setup_run(name, describe, context_schema, callbacks, modes)
        self._setup_model(llm, prompt, output, retries)
        self._setup_tool_loop(tool_errors=tool_errors, parallel_tools=parallel_tools, on_trace=on_trace)
        self.backend = backend
        self.permissions = list(permissions) if permissions is not None else None
        if backend is not None and self.permissions:
            from ai_utils.deep.backends import attach_permissions

            attach_permissions(backend, self.permissions)  # the local shell hides what these rules deny
        self.interrupt_on = dict(interrupt_on) if interrupt_on else None
        self.agents_md = list(agents_md) if agents_md is not None else None
        self._trust = context_trust_middleware(context_trust, owner="DeepAgent")
        self.context_trust = context_trust
        self._trust_instruction = TRUST_INSTRUCTION if self._trust else None
        self.subagents = [_subagent(spec, self._subagent_loop) for spec in subagents] if subagents is not None else None
        self.skills = list(skills) if skills is not None else None
        self._skills = skills_middleware(skills, backend) if skills is not None else None
        self.middleware = list(middleware)
        self._setup_input_guards(self.middleware)
        self._mode_middleware: list[Any] = []
        if modes is not None:
            from ai_utils.routing._middleware import ModeMiddleware

            router = ModeMiddleware(modes)
            self._mode_middleware.append(router)
            self._start_hook = router.start  # the turn's mode is decided once, from its input
        self.store = store
        self._general_purpose = self._general_purpose_subagent()
        self._graph: Graph | None = None
        self._rebuild()

    def _saver(self, checkpointer: Any) -> Any:
        """``True`` keeps threads in memory, ``False`` keeps none."""
        if checkpointer is True:
            return InMemorySaver()
        return None if checkpointer is False else checkpointer

    # --- building ----------------------------------------------------------------------------------------

    @property
    def current_tools(self) -> list[str]:
        """Names of the tools the model is offered: built-in file/plan/``task`` tools and the agent's own.

        With MCP servers, their tools are listed too once a run has loaded them.
        """
        node = self.graph.nodes["tools"].bound
        names = list(getattr(node, "tools_by_name", {}))
        # deepagents registers `execute` always but hides it from the model unless the backend can run commands.
        if self.backend is None or not supports_execution(self.backend):
            names = [n for n in names if n != "execute"]
        return names

    def add_tool(self, tool: BaseTool | Callable[..., Any]) -> None:
        """Add one tool; the graph is rebuilt.

        Raises:
            UserError: when a tool of that name exists already.
        """
        tools = [*self._tools, *normalize_tools([tool])]
        if self._sessions_link is not None:
            self._sessions_link.check_tools(tools)
        check_unique(t.name for t in tools)
        self._tools = tools
        self._rebuild()

    def _rebuild(self) -> None:
        # Built now also with MCP servers, so a bad configuration fails here rather than in the first run;
        # with them the first run builds the graph with their tools (see GraphRunner._open).
        graph = self._compile(self._tools, gated=not self._servers)
        self._graph = None if self._servers else graph
        self._mcp_graph = None

    def _own_middleware(self) -> list[Any]:
        return [
            # The tool loop first among ours: each call takes its place in its reply's order before any of
            # our middleware may answer it (deepagents' own middleware stay outside it).
            self._tool_loop,
            # With sessions the session middleware is the repair step (a ThreadRepair that also steers).
            *self._repair,
            *self._trust,
            *self.middleware,
            *self._mode_middleware,
            *self._guards,
            # Takes deepagents' skills slot by name (its sources also reach the general-purpose subagent).
            *([self._skills] if self._skills is not None else []),
        ]

    def _subagent_loop(self, model: Any) -> list[Any]:
        """Fresh tool-loop and trust middleware for one subagent's stack (they keep per-stack state).

        The tool-call part of the main agent's tool loop only: a subagent's model calls are not the run's
        iterations (``details=True`` counts the main agent's), and DeepAgent has no ``max_iterations``. The run's
        ``allowed_tools`` still hold for a subagent's calls. The trust block instruction goes into each model
        call, since deepagents writes the subagent's system prompt.
        """
        loop = ToolCalls(self._tool_loop.options, model if model is not None else self.llm)
        return [loop, *context_trust_middleware(self.context_trust, owner="DeepAgent", instruct=True)]

    def _general_purpose_subagent(self) -> list[Any]:
        """The general-purpose subagent declared by us, so it gets our stack too (none if the user declares one).

        The one deepagents adds inherits only main-agent middleware that takes one of its slots, never the tool loop
        or context trust; a declared spec of that name replaces it (same prompt, description, model and tools).
        """
        name = GENERAL_PURPOSE_SUBAGENT["name"]
        if any(isinstance(spec, Mapping) and spec.get("name") == name for spec in self.subagents or ()):
            return []
        inherited = [m for m in self._own_middleware() if getattr(m, "name", None) in _GENERAL_PURPOSE_SLOTS]
        return [{**GENERAL_PURPOSE_SUBAGENT, "middleware": [*self._subagent_loop(None), *inherited]}]

    def _middleware_in_use(self) -> list[Any]:
        subagents = [*self._general_purpose, *(self.subagents or ())]
        declared = [m for spec in subagents if isinstance(spec, Mapping) for m in spec.get("middleware", ())]
        return [*self._own_middleware(), *declared]

    def _build(self, tools: Sequence[BaseTool]) -> Graph:
        graph: Graph = create_deep_agent(
            model=self.llm,
            tools=[guard_tool(t) for t in tools],
            system_prompt=self.system_prompt,
            # ThreadRepair has the name of deepagents' PatchToolCallsMiddleware, so it takes that slot.
            middleware=[TodoListMiddleware(), *self._own_middleware()],
            subagents=[*self._general_purpose, *(self.subagents or ())],
            memory=self.agents_md,
            permissions=self.permissions,
            backend=self.backend,
            interrupt_on=self._interrupt_on,
            response_format=self.output,
            context_schema=self.context_schema,
            checkpointer=self.checkpointer,
            store=self.store,
            name=self.name,
        )
        return graph
