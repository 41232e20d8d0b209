"""The `JevToolCaller` class: its constructor checks and four public shells over one run core."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel
from typing_extensions import TypedDict, Unpack

from ai_utils._run.args import check_approval_saver, check_prompt, mcp_servers
from ai_utils._run.calls import check_thread, resume_command, run_config
from ai_utils._utils import run_sync
from ai_utils.client import Decision
from ai_utils.exceptions import UserError
from ai_utils.jev._options import check_options
from ai_utils.jev.client import DEFAULT_MODEL, JevClient, shared_http_client
from ai_utils.jev.tool_caller import _core as core
from ai_utils.jev.tool_caller._graph import build_graph
from ai_utils.jev.tool_caller._result import result
from ai_utils.jev.tool_caller._runtime import RunContext, fresh_input
from ai_utils.jev.tool_caller._setup import (
    check_forced,
    check_gate,
    check_interrupt_on,
    unknown_tool,
    validate_context,
)
from ai_utils.jev.tool_caller._tools import by_name, jev_tool_entries, run_tools
from ai_utils.jev.tool_caller._types import ConfidenceGate, JevOutput, JevReturn, JevTool
from ai_utils.tools._mcp_config import MCPServer

__all__ = ["JevToolCaller"]

_DECISIONS = ("approve", "reject")


class InvokeOptions(TypedDict, total=False):
    """The keyword options of `JevToolCaller.invoke` and `ainvoke` (documented on `invoke`)."""

    thread_id: str | None
    context: Any
    decision: Decision | None
    debug: bool
    timeout: float | None


class _CallToolTarget(TypedDict):
    # Required keys by inheritance: `Required[...]` is not seen at run time under postponed annotations.
    tool: str
    params: Mapping[str, Any]


class CallToolOptions(_CallToolTarget, total=False):
    """The keyword options of `JevToolCaller.call_tool` and `acall_tool` (documented on `call_tool`)."""

    thread_id: str | None
    context: Any


@dataclass(frozen=True)
class _Call:
    """One checked call: everything its run needs (the validated ``context`` is never stored)."""

    entry: str  # the public method, for messages
    request: dict[str, Any] | None
    context: Any
    thread_id: str | None
    timeout: float | None = None
    decision: Decision | None = None
    debug: bool = False
    tool: str | None = None  # call_tool: the tool to run, without asking Jev
    params: dict[str, Any] | None = None  # call_tool: one candidate per parameter


class JevToolCaller:
    """Pick exactly one tool (local or MCP) with Jev and run it once, with arguments chosen from candidates.

    Args:
        tools: `JevTool`s or mappings ``{name, description, func, params?}``; may be empty with ``mcp_server``.
        prompt: a domain system prompt; the built-in default is appended to it.
        model: the Jev model (default ``~typesafe/jev-latest``).
        context_schema: a pydantic model; ``context`` is validated by it on every call.
        checkpointer: keeps each thread's history (requests, tool names, params, results) and pending
            proposals; every call then needs a ``thread_id``.
        interrupt_on: ``{tool_name: question}``; the question is a str or a (sync/async) callable receiving
            ``tool, params, state, thread_id, context``. Pauses before ``func``; needs a checkpointer.
        confidence_gate: `ConfidenceGate` or ``{"min_confidence": ..., "tools": {...}}`` (default threshold 0.5).
        mcp_server: one or more `MCPServer`s; connected per call, tools named ``<server>__<tool>``, candidates
            from ``MCPServer(params={unprefixed_tool_name: ...})``.
        api_key: the Jev key (default ``OPENROUTER_API_KEY``).
        base_url: the API root (default ``JEV_BASE_URL`` or ``https://openrouter.ai/api``).
        timeout: seconds per Jev call (default 30).

    Raises:
        UserError: no tools, duplicate or empty names, an empty description, ``interrupt_on`` without a
            checkpointer, a bad ``context_schema``/gate/MCP config, or no API key.
        JevParamsError: (a `TypeError`) static ``params`` that are not lists.
    """

    def __init__(
        self,
        *,
        tools: Sequence[JevTool | Mapping[str, Any]],
        prompt: str | None = None,
        model: str = DEFAULT_MODEL,
        context_schema: type[BaseModel] | None = None,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
        interrupt_on: Mapping[str, str | Callable[..., str]] | None = None,
        confidence_gate: ConfidenceGate | Mapping[str, Any] | None = None,
        mcp_server: MCPServer | Sequence[MCPServer] | Mapping[str, Any] | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
    ) -> None:
        self._tools = jev_tool_entries(tools)
        self._servers = mcp_servers(mcp_server)
        if not self._tools and not self._servers:
            raise UserError("JevToolCaller needs at least one tool: pass `tools=[JevTool(...)]` or `mcp_server=...`.")
        if context_schema is not None and not (
            isinstance(context_schema, type) and issubclass(context_schema, BaseModel)
        ):
            raise UserError(f"`context_schema` must be a pydantic model class, got {context_schema!r}.")
        prompt = check_prompt(prompt, owner="JevToolCaller")
        self._interrupt_on = check_interrupt_on(interrupt_on)
        check_approval_saver(
            self._interrupt_on, checkpointer, "Pass `checkpointer=MemorySaver()` (or sqlite_saver(path)).",
            pauses="before a tool runs",
        )  # fmt: skip
        self._gate = check_gate(confidence_gate)
        self._warned: set[str] = set()
        if not self._servers:
            self._warn_unknown(self._tools)
        self.prompt = prompt
        self.model = model
        self.context_schema = context_schema
        self.checkpointer = checkpointer
        jev = JevClient(
            api_key=api_key, base_url=base_url, model=model, timeout=timeout, http_client=shared_http_client()
        )
        # The caller's part of every run's context; each run copies it with its own tools and call.
        self._settings = RunContext(
            prompt=core.system_prompt(prompt), tools={}, jev=jev, gate=self._gate, interrupt_on=self._interrupt_on
        )
        self._graph = build_graph(checkpointer)

    def __repr__(self) -> str:
        names = [tool.name for tool in self._tools]
        return f"JevToolCaller(tools={names!r}, mcp_servers={[s.name for s in self._servers]!r}, model={self.model!r})"

    @property
    def graph(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The compiled LangGraph graph (nodes: select_tool, resolve_params, select_params, gate, approval, execute)."""
        return self._graph

    @property
    def tools(self) -> list[JevTool]:
        """The local tools (MCP tools are loaded per call)."""
        return [JevTool(t.name, t.description, t.func, t.params) for t in self._tools]

    # --- public shells: each checks its arguments, then runs the one core -----------------------------------

    def invoke(self, request: Mapping[str, Any] | None = None, **options: Unpack[InvokeOptions]) -> JevOutput:
        """Pick a tool and its params for ``request`` and run it once (or resume a pending proposal).

        Args:
            request: the user's request: JSON fields, e.g. ``{"question": "...", "locale": "de-DE"}``.
            thread_id: the conversation; required with a checkpointer, handed to your callables.
            context: local data for ``params`` callables and ``func`` (validated by ``context_schema``);
                never sent to Jev, stored or put in debug metadata. Pass it again when resuming.
            decision: ``"approve"`` or ``"reject"`` a pending `JevInterrupt` of ``thread_id`` (no request then).
                Approving makes no Jev call and runs ``func`` once; rejecting never runs it.
            debug: add `JevMetadata` (``metadata``) to the output.
            timeout: seconds per Jev call (default: the caller's).

        Returns:
            `JevReturn` (``kind="return"``), `JevGated` (a confidence below the gate; nothing ran) or
            `JevInterrupt` (waiting for approval).

        Raises:
            UserError: invalid arguments (see the class), a ``decision`` other than ``"approve"``/``"reject"``,
                or a ``decision`` with nothing pending.
            JevNoParamOptionsError: the picked tool has an empty candidate list.
            JevParamsError: (a `TypeError`) ``params`` gave something other than lists.
            JevAPIError: Jev failed (`JevTimeoutError` on timeouts).
        """
        return self._invoke(self._check("invoke", request, options))

    async def ainvoke(self, request: Mapping[str, Any] | None = None, **options: Unpack[InvokeOptions]) -> JevOutput:
        """Async `invoke`: the same arguments, result and errors."""
        return await self._ainvoke(self._check("ainvoke", request, options))

    def call_tool(self, request: Mapping[str, Any] | None, **options: Unpack[CallToolOptions]) -> JevReturn:
        """Run ``tool`` with ``params`` without asking Jev (an override, e.g. after `JevGated`).

        The params are checked against the tool's candidates (bounded): each value must be one of them (the
        same object, an equal one, or its JSON form as in a `JevGated`); ``func`` receives the candidate
        object. The gate and ``interrupt_on`` are bypassed; history is kept as with `invoke`.

        Args:
            request: the request fields (may be ``None``), kept in the thread's history as with `invoke`.
            tool: the tool to run (MCP tools: ``<server>__<tool>``).
            params: one value per parameter, each among the tool's candidates.
            thread_id: as in `invoke`.
            context: as in `invoke`.

        Raises:
            UserError: an unknown tool or invalid arguments.
            JevParamsError: (a `TypeError`) unknown or missing keys, or a value outside the candidates.
        """
        return _returned(self._invoke(self._check_forced("call_tool", request, options)))

    async def acall_tool(self, request: Mapping[str, Any] | None, **options: Unpack[CallToolOptions]) -> JevReturn:
        """Async `call_tool`."""
        return _returned(await self._ainvoke(self._check_forced("acall_tool", request, options)))

    # --- the core: one run of the graph -------------------------------------------------------------------

    def _invoke(self, call: _Call) -> JevOutput:
        if self._servers:  # MCP sessions are async: the sync twin drives the async core
            return run_sync(lambda: self._ainvoke(call), what=f"JevToolCaller.{call.entry} with MCP servers")
        run, config = self._start(by_name(self._tools), call)
        graph_input: Any = self._fresh(call)
        if graph_input is None:
            graph_input = resume_command(self._graph.get_state(config), config, call.decision, None, _idle(call))
        return result(self._graph.invoke(graph_input, config, **self._run_options(run)), run, call.debug)

    async def _ainvoke(self, call: _Call) -> JevOutput:
        async with run_tools(self._tools, self._servers, self._warn_unknown) as tools:
            run, config = self._start(tools, call)
            try:
                graph_input: Any = self._fresh(call)
                if graph_input is None:
                    state = await self._graph.aget_state(config)
                    graph_input = resume_command(state, config, call.decision, None, _idle(call))
                output = await self._graph.ainvoke(graph_input, config, **self._run_options(run))
            finally:
                await run.aclose()
        return result(output, run, call.debug)

    def _start(self, tools: Mapping[str, core.ToolEntry], call: _Call) -> tuple[RunContext, Any]:
        """The run's context and config, once the forced tool (``call_tool``) is known to be one of ``tools``."""
        if call.tool is not None and call.tool not in tools:
            unknown_tool(call.tool, tools)
        run = dataclasses.replace(
            self._settings,
            tools=tools,
            context=call.context,
            thread_id=call.thread_id,
            timeout=call.timeout,
            forced_params=call.params,
        )
        return run, run_config(call.thread_id)

    @staticmethod
    def _fresh(call: _Call) -> dict[str, Any] | None:
        """The input of a new request (``None`` when resuming a proposal)."""
        return fresh_input(call.request, forced_tool=call.tool) if call.decision is None else None

    def _run_options(self, run: RunContext) -> dict[str, Any]:
        # Each step is stored before the next starts, so a proposal is durable before invoke returns.
        durability: Literal["sync"] | None = "sync" if self.checkpointer is not None else None
        return {"context": run, "durability": durability, "version": "v2"}

    # --- call checks ------------------------------------------------------------------------------------------

    def _check(self, entry: str, request: Any, options: InvokeOptions) -> _Call:
        check_options(entry, options, InvokeOptions)
        decision, timeout = options.get("decision"), options.get("timeout")
        if decision is not None and request is not None:
            raise UserError(
                "Pass either request fields (a new request) or `decision` (answer the pending proposal), "
                f"not both; got decision={decision!r} with request fields {sorted(map(str, request))!r}."
                if isinstance(request, Mapping)
                else f"Pass either a request or `decision`, not both; got decision={decision!r}."
            )
        if decision is None and request is None:
            raise UserError("Nothing to do: pass the request fields, e.g. `invoke({'question': '...'})`.")
        if decision is not None and decision not in _DECISIONS:
            raise UserError(f"`decision` must be 'approve' or 'reject', got {decision!r}.")
        self._check_thread(options.get("thread_id"), resuming=decision is not None)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise UserError(f"`timeout` must be a number of seconds > 0, got {timeout!r}.")
        return _Call(
            entry,
            None if request is None else core.check_request(request),
            validate_context(self.context_schema, options.get("context")),
            options.get("thread_id"),
            timeout,
            decision,
            options.get("debug", False),
        )

    def _check_forced(self, entry: str, request: Any, options: CallToolOptions) -> _Call:
        check_options(entry, options, CallToolOptions)
        thread_id = options.get("thread_id")
        self._check_thread(thread_id, resuming=False)
        checked = None if request is None else core.check_request(request)
        context = validate_context(self.context_schema, options.get("context"))
        return _Call(entry, checked, context, thread_id, tool=options["tool"], params=check_forced(options["params"]))

    def _check_thread(self, thread_id: Any, *, resuming: bool) -> None:
        check_thread(
            owner="JevToolCaller",
            thread_id=thread_id,
            resuming=resuming,
            has_checkpointer=self.checkpointer is not None,
            resume_fix="Create the caller with `checkpointer=MemorySaver()` and `interrupt_on={...}`.",
        )

    def _warn_unknown(self, tools: Sequence[core.ToolEntry]) -> None:
        names = {tool.name for tool in tools}
        checks: list[tuple[str, Iterable[str]]] = [
            ("interrupt_on", self._interrupt_on),
            ("confidence_gate.tools", self._gate.tools),
        ]
        for server in self._servers:
            offered = {tool.name for tool in tools if tool.server is server}
            unknown = [key for key in server.params or {} if f"{server.name}__{key}" not in offered]
            checks.append((f"MCPServer({server.name!r}).params", [f"{server.name}__{key}" for key in unknown]))
        for where, keys in checks:
            for key in keys:
                if key not in names and f"{where}:{key}" not in self._warned:
                    self._warned.add(f"{where}:{key}")
                    warnings.warn(
                        f"JevToolCaller: {where} key {key!r} matches no tool {sorted(names)!r}; it has no effect. "
                        "Check the spelling (MCP tools are named `<server>__<tool>`).",
                        UserWarning,
                        stacklevel=3,
                    )


def _idle(call: _Call) -> str:
    """The message for a decision on a thread with nothing pending."""
    return (
        f"Thread {call.thread_id!r} has no pending proposal to {call.decision}. Send a request first; "
        "only tools listed in `interrupt_on` pause for approval."
    )


def _returned(output: JevOutput) -> JevReturn:
    """``call_tool``'s result: the gate and ``interrupt_on`` are bypassed, so the tool always ran."""
    assert isinstance(output, JevReturn)
    return output
