"""`JevToolCaller`: bounded tool calling with Jev.

Jev picks one tool and, for its parameters, only values from candidate lists you provide; the tool then
runs exactly once. No generated arguments, no loop.

```python
caller = JevToolCaller(
    tools=[
        JevTool("get_candidate", "Returns a candidate from the recruiting system.",
                func=lambda params, context: fetch(params["candidate"], context.api_token),
                params=lambda context: {"candidate": load_candidates(context.tenant_id)}),
        JevTool("healthcheck", "Checks whether the recruiting system is reachable.", func=check_health),
    ],
    context_schema=Ctx,
    checkpointer=MemorySaver(),
)
out = caller.invoke({"question": "Which Max Müller was born in 2002?"}, thread_id="u1", context=ctx)
if out.kind == "return" and not out.rejected:
    out.value, out.tool.name, out.params["candidate"].value
```

Flow (a LangGraph graph, see `_tool_caller_graph`): Jev call 1 picks the tool; only that tool's ``params``
are resolved; Jev call 2 picks every ambiguous parameter at once (skipped when each list has one element);
the confidence gate (always on) may return `JevGated`; ``interrupt_on`` may pause with `JevInterrupt`;
``func`` runs once. ``context`` reaches your callables only: never Jev, a checkpoint or debug metadata.

Resuming a paused proposal (``decision=...``), possibly in another process, calls the tool's ``params``
again with the new ``context`` and takes the approved candidate from that list (checked by its JSON
rendering), since checkpoints store candidates as JSON, never as objects.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel

from ai_utils._run.calls import run_config
from ai_utils._utils import run_sync
from ai_utils.exceptions import UserError
from ai_utils.jev import _tool_caller_core as core
from ai_utils.jev import _tool_caller_run as run_helpers
from ai_utils.jev._tool_caller_graph import RunContext, build_graph, fresh_input
from ai_utils.jev._tool_caller_run import Decision
from ai_utils.jev._tool_caller_types import (
    ConfidenceGate,
    JevOutput,
    JevReturn,
    JevTool,
)
from ai_utils.jev.client import DEFAULT_MODEL, JevClient, shared_http_client
from ai_utils.tools._mcp_config import MCPServer, normalize_mcp_servers

__all__ = ["JevToolCaller"]


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
        self._tools = run_helpers.normalize_tools(tools)
        self._servers = normalize_mcp_servers(mcp_server)
        if not self._tools and not self._servers:
            raise UserError("JevToolCaller needs at least one tool: pass `tools=[JevTool(...)]` or `mcp_server=...`.")
        if self._servers:
            import ai_utils.tools.mcp  # noqa: F401  # fail now, not mid-run, when the `mcp` extra is missing
        if context_schema is not None and not (
            isinstance(context_schema, type) and issubclass(context_schema, BaseModel)
        ):
            raise UserError(f"`context_schema` must be a pydantic model class, got {context_schema!r}.")
        if prompt is not None and not isinstance(prompt, str):
            raise UserError(f"`prompt` must be a str, got {type(prompt).__name__}.")
        self._interrupt_on = run_helpers.check_interrupt_on(interrupt_on)
        if self._interrupt_on and checkpointer is None:
            raise UserError(
                "`interrupt_on` pauses before a tool runs, which needs a checkpointer to resume from. "
                "Pass `checkpointer=MemorySaver()` (or sqlite_saver(path))."
            )
        self._gate = run_helpers.check_gate(confidence_gate)
        self._warned: set[str] = set()
        if not self._servers:
            self._warn_unknown(self._tools)
        self.prompt = prompt
        self.model = model
        self.context_schema = context_schema
        self.checkpointer = checkpointer
        self._system_prompt = core.system_prompt(prompt)
        self._jev = JevClient(
            api_key=api_key, base_url=base_url, model=model, timeout=timeout, http_client=shared_http_client()
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

    # --- invoke ----------------------------------------------------------------------------------------------

    def invoke(
        self,
        request: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        context: Any = None,
        decision: Decision | None = None,
        debug: bool = False,
        timeout: float | None = None,
    ) -> JevOutput:
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
            UserError: invalid arguments (see the class), or ``decision`` with nothing pending.
            JevNoParamOptionsError: the picked tool has an empty candidate list.
            JevParamsError: (a `TypeError`) ``params`` gave something other than lists.
            JevAPIError: Jev failed (`JevTimeoutError` on timeouts).
        """
        call = self._check(request, thread_id, context, decision, timeout)
        if self._servers:
            return run_sync(
                lambda: self.ainvoke(
                    request, thread_id=thread_id, context=context, decision=decision, debug=debug, timeout=timeout
                ),
                what="JevToolCaller.invoke with MCP servers",
            )
        run = self._run(self._tools_by_name(self._tools), call)
        config = run_config(thread_id)
        if decision is None:
            graph_input: Any = fresh_input(call["request"])
        else:
            graph_input = run_helpers.resume(decision, thread_id, self._graph.get_state(config).interrupts)
        output = self._graph.invoke(graph_input, config, context=run, durability=self._durability, version="v2")
        return run_helpers.result(output, run, debug)

    async def ainvoke(
        self,
        request: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        context: Any = None,
        decision: Decision | None = None,
        debug: bool = False,
        timeout: float | None = None,
    ) -> JevOutput:
        """Async `invoke`: the same arguments, result and errors."""
        call = self._check(request, thread_id, context, decision, timeout)
        config = run_config(thread_id)
        async with self._run_tools() as tools:
            run = self._run(tools, call)
            try:
                if decision is None:
                    graph_input: Any = fresh_input(call["request"])
                else:
                    graph_input = run_helpers.resume(
                        decision, thread_id, (await self._graph.aget_state(config)).interrupts
                    )
                output = await self._graph.ainvoke(
                    graph_input, config, context=run, durability=self._durability, version="v2"
                )
            finally:
                await run.aclose()
        return run_helpers.result(output, run, debug)

    # --- call_tool -------------------------------------------------------------------------------------------

    def call_tool(
        self,
        request: Mapping[str, Any] | None,
        *,
        tool: str,
        params: Mapping[str, Any],
        thread_id: str | None = None,
        context: Any = None,
    ) -> JevReturn:
        """Run ``tool`` with ``params`` without asking Jev (an override, e.g. after `JevGated`).

        The params are checked against the tool's candidates (bounded): each value must be one of them (the
        same object, an equal one, or its JSON form as in a `JevGated`); ``func`` receives the candidate
        object. The gate and ``interrupt_on`` are bypassed; history is kept as with `invoke`.

        Raises:
            UserError: an unknown tool or invalid arguments.
            JevParamsError: (a `TypeError`) unknown or missing keys, or a value outside the candidates.
        """
        call = self._check(request, thread_id, context, None, None, forced=True)
        given = run_helpers.check_forced(params)
        if self._servers:
            return run_sync(
                lambda: self.acall_tool(request, tool=tool, params=params, thread_id=thread_id, context=context),
                what="JevToolCaller.call_tool with MCP servers",
            )
        run = self._run(self._tools_by_name(self._tools), call, forced=given)
        if tool not in run.tools:
            run_helpers.unknown_tool(tool, run.tools)
        output = self._graph.invoke(
            fresh_input(call["request"], forced_tool=tool), run_config(thread_id), context=run,
            durability=self._durability, version="v2",
        )  # fmt: skip
        result = run_helpers.result(output, run, False)
        assert isinstance(result, JevReturn)
        return result

    async def acall_tool(
        self,
        request: Mapping[str, Any] | None,
        *,
        tool: str,
        params: Mapping[str, Any],
        thread_id: str | None = None,
        context: Any = None,
    ) -> JevReturn:
        """Async `call_tool`."""
        call = self._check(request, thread_id, context, None, None, forced=True)
        given = run_helpers.check_forced(params)
        async with self._run_tools() as tools:
            run = self._run(tools, call, forced=given)
            if tool not in run.tools:
                run_helpers.unknown_tool(tool, run.tools)
            output = await self._graph.ainvoke(
                fresh_input(call["request"], forced_tool=tool), run_config(thread_id), context=run,
                durability=self._durability, version="v2",
            )  # fmt: skip
        result = run_helpers.result(output, run, False)
        assert isinstance(result, JevReturn)
        return result

    # --- internals -------------------------------------------------------------------------------------------

    @property
    def _durability(self) -> Literal["sync"] | None:
        # Each step is stored before the next starts, so a proposal is durable before invoke returns.
        return "sync" if self.checkpointer is not None else None

    def _check(
        self, request: Any, thread_id: Any, context: Any, decision: Any, timeout: Any, *, forced: bool = False
    ) -> dict[str, Any]:
        if decision is not None:
            if request is not None:
                raise UserError(
                    "Pass either request fields (a new request) or `decision` (answer the pending proposal), "
                    f"not both; got decision={decision!r} with request fields {sorted(map(str, request))!r}."
                    if isinstance(request, Mapping)
                    else f"Pass either a request or `decision`, not both; got decision={decision!r}."
                )
            if decision not in ("approve", "reject"):
                raise UserError(f"`decision` must be 'approve' or 'reject', got {decision!r}.")
            if self.checkpointer is None:
                raise UserError(
                    "`decision` resumes a pending proposal, which needs a checkpointer. Create the caller with "
                    "`checkpointer=MemorySaver()` and `interrupt_on={...}`."
                )
        elif request is None and not forced:
            raise UserError("Nothing to do: pass the request fields, e.g. `invoke({'question': '...'})`.")
        if thread_id is not None and not isinstance(thread_id, str):
            raise UserError(f"`thread_id` must be a str, got {type(thread_id).__name__}.")
        if self.checkpointer is not None and not thread_id:
            raise UserError(
                "This JevToolCaller has a checkpointer, so every call needs a `thread_id` naming the conversation, "
                "e.g. `thread_id='customer-42'`."
            )
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise UserError(f"`timeout` must be a number of seconds > 0, got {timeout!r}.")
        return {
            "request": None if request is None or decision is not None else core.check_request(request),
            "context": run_helpers.validate_context(self.context_schema, context),
            "thread_id": thread_id,
            "timeout": timeout,
        }

    def _run(
        self, tools: Mapping[str, core.ToolEntry], call: Mapping[str, Any], *, forced: Mapping[str, Any] | None = None
    ) -> RunContext:
        return RunContext(
            prompt=self._system_prompt,
            tools=tools,
            jev=self._jev,
            gate=self._gate,
            interrupt_on=self._interrupt_on,
            context=call["context"],
            thread_id=call["thread_id"],
            timeout=call["timeout"],
            forced_params=forced,
        )

    @staticmethod
    def _tools_by_name(tools: Sequence[core.ToolEntry]) -> dict[str, core.ToolEntry]:
        return {tool.name: tool for tool in tools}

    @asynccontextmanager
    async def _run_tools(self) -> AsyncIterator[dict[str, core.ToolEntry]]:
        """This call's tools; MCP sessions stay open until the call ends (closed on errors too)."""
        if not self._servers:
            yield self._tools_by_name(self._tools)
            return
        from ai_utils.tools.mcp import mcp_scope

        async with mcp_scope(self._servers) as scope:
            entries = list(self._tools)
            for server in self._servers:
                entries += [run_helpers.mcp_entry(server, tool) for tool in scope.tools_by_server.get(server.name, [])]
            run_helpers.check_names([entry.name for entry in entries])
            if not entries:
                raise UserError(
                    f"No tools: the MCP servers {[s.name for s in self._servers]!r} offer none and no local tools "
                    "were given. Pass `tools=[...]` or check the servers."
                )
            self._warn_unknown(entries)
            yield self._tools_by_name(entries)

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
