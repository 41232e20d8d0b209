"""`langgraph_api_routes`: the LangGraph Server API over durable sessions (SPEC §21), as Starlette routes."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, NoReturn

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ai_utils.exceptions import UserError
from ai_utils.gateway.actor import Actor
from ai_utils.server._bodies import check_id
from ai_utils.server._options import ContextHook, blocking, check_options
from ai_utils.server._request import (
    Authenticate,
    RequestError,
    actor_key,
    endpoint,
    failure_response,
    parse_cursor,
    read_json,
    refuse,
)
from ai_utils.server._respond import EventStreamResponse
from ai_utils.server.langgraph import _schema as schema
from ai_utils.server.langgraph._bodies import (
    parse_checkpoint,
    parse_history,
    parse_limit,
    parse_run,
    parse_search,
    parse_stream_modes,
    parse_thread,
)
from ai_utils.server.langgraph._follow import Thread, log_failure
from ai_utils.server.langgraph._parts import RunParts
from ai_utils.server.langgraph._runs import Started, cancel_run, start_run, turn_info
from ai_utils.server.langgraph._tables import Tables, ThreadRow, TurnInfo
from ai_utils.sessions._attach import agent_name
from ai_utils.sessions._store import SessionStore

__all__ = ["SUPPORTED", "langgraph_api_routes"]

SUPPORTED = (
    "POST /assistants/search",
    "GET /assistants/{assistant_id}",
    "GET /assistants/{assistant_id}/graph",
    "GET /assistants/{assistant_id}/schemas",
    "POST /threads",
    "POST /threads/search",
    "GET|PATCH /threads/{thread_id}",
    "GET /threads/{thread_id}/state",
    "GET /threads/{thread_id}/state/{checkpoint_id}",
    "POST /threads/{thread_id}/state/checkpoint",
    "POST /threads/{thread_id}/history",
    "GET|POST /threads/{thread_id}/runs",
    "POST /threads/{thread_id}/runs/stream",
    "POST /threads/{thread_id}/runs/wait",
    "GET /threads/{thread_id}/runs/{run_id}",
    "GET /threads/{thread_id}/runs/{run_id}/join",
    "GET /threads/{thread_id}/runs/{run_id}/stream",
    "POST /threads/{thread_id}/runs/{run_id}/cancel",
    "POST /runs/stream",
    "POST /runs/wait",
)
"""The endpoints served; any other path under the API's prefixes is a JSON 404 that lists these."""

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
}
_PREFIXES = ("assistants", "threads", "runs", "crons", "store")
_EVERYTHING = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
_log = logging.getLogger("ai_utils.server")

Handler = Callable[[Request, Actor], Awaitable[Response]]


def _error(exc: Exception) -> Response:
    """The JSON error object plus the LangGraph API's ``code``; ``x-request-id`` names a logged failure."""
    return _with_code(failure_response(exc))


def _with_code(response: JSONResponse) -> Response:
    body = json.loads(bytes(response.body))
    body["code"] = _CODES.get(response.status_code, "internal_error")
    if response.status_code == 409:
        body["type"] = "Conflict"
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type")}
    if "error_id" in body:
        headers["x-request-id"] = str(body["error_id"])
    return JSONResponse(body, status_code=response.status_code, headers=headers)


def _run_path(thread_id: str, run_id: str) -> str:
    # Relative to the API's base URL: the SDKs resolve a Location against the base URL they were given.
    return f"/threads/{thread_id}/runs/{run_id}"


class _Api:
    """The endpoints (one object, so each route is a short method); state lives in the store, not here."""

    def __init__(
        self, agents: dict[str, Any], store: SessionStore, max_body_bytes: int, context: ContextHook | None
    ) -> None:
        self.agents = agents
        self.store = store
        self.tables = Tables(store)
        self.max_body_bytes = max_body_bytes
        self.context = context
        self.created = time.time()
        self._recovery: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
            weakref.WeakKeyDictionary()
        )

    # --- plumbing ----------------------------------------------------------------------------------------

    def handler(self, fn: Handler) -> Handler:
        """``fn`` with recovery started and errors in the LangGraph API's shape."""

        async def run(request: Request, actor: Actor) -> Response:
            self._watch()
            try:
                return await fn(request, actor)
            except Exception as exc:  # the top-level handler: the client gets the JSON error object
                return _error(exc)

        return run

    def _watch(self) -> None:
        """Start this process's recovery on the serving loop (once per loop)."""
        loop = asyncio.get_running_loop()
        task = self._recovery.get(loop)
        if task is None or task.done():
            self._recovery[loop] = loop.create_task(self._recover(), name="ai_utils-langgraph-recovery")

    async def _recover(self) -> None:
        """Continue runs whose worker died, every lease period: nothing has to follow a run for it to finish."""
        every = min(max(self.store.lease_seconds, 0.5), 30.0)
        agents = list({id(a): a for a in self.agents.values()}.values())
        while True:
            for agent in agents:
                try:
                    await blocking(self.store, agent.recover)
                except Exception as exc:  # a failed pass is retried at the next one
                    log_failure("recovering sessions failed", exc)
            await asyncio.sleep(every)

    async def io(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await blocking(self.store, fn, *args)

    def _agent(self, assistant_id: str) -> Any:
        agent = self.agents.get(assistant_id)
        if agent is None:
            refuse(404, f"There is no assistant {assistant_id!r}; POST /assistants/search lists them.")
        return agent

    async def _row(self, request: Request, actor: Actor) -> ThreadRow:
        thread_id = check_id(request.path_params.get("thread_id"), "thread_id")
        row: ThreadRow | None = await self.io(self.tables.thread, thread_id, actor_key(actor))
        if row is None:
            refuse(404, f"There is no thread {thread_id!r} for you; create one with POST /threads.")
        return row

    def _thread(self, row: ThreadRow) -> Thread | None:
        """The thread's agent view (``None`` before its first run: no session yet)."""
        if row.assistant is None:
            return None
        return Thread(self._agent(row.assistant), self.tables, row.thread_id)

    async def _run(self, request: Request, actor: Actor) -> tuple[ThreadRow, Thread, TurnInfo]:
        row = await self._row(request, actor)
        run_id = check_id(request.path_params.get("run_id"), "run_id")
        thread = self._thread(row)
        stored = None if thread is None else await self.io(self.store.turn, run_id)
        if thread is None or stored is None or stored.session_id != row.thread_id:
            refuse(404, f"There is no run {run_id!r} on thread {row.thread_id!r}; GET /threads/{{id}}/runs lists them.")
        return row, thread, turn_info(stored)

    # --- assistants --------------------------------------------------------------------------------------

    async def assistants_search(self, request: Request, actor: Actor) -> Response:
        """``POST /assistants/search``: one assistant per agent (its name is the assistant id and graph id)."""
        limit, offset, body = parse_search(
            await read_json(request, self.max_body_bytes, required=False), ("metadata", "graph_id", "name")
        )
        found = []
        for name, agent in self.agents.items():
            item = schema.assistant(name, agent, self.created)
            wanted = body.get("metadata") or {}
            if body.get("graph_id") not in (None, name) or body.get("name") not in (None, name):
                continue
            metadata = item["metadata"] or {}
            if not isinstance(wanted, Mapping) or any(metadata.get(k) != v for k, v in wanted.items()):
                continue
            found.append(item)
        return JSONResponse(found[offset : offset + limit])

    async def assistant_get(self, request: Request, actor: Actor) -> Response:
        """``GET /assistants/{id}``."""
        name = check_id(request.path_params.get("assistant_id"), "assistant_id")
        return JSONResponse(schema.assistant(name, self._agent(name), self.created))

    async def assistant_graph(self, request: Request, actor: Actor) -> Response:
        """``GET /assistants/{id}/graph``: the agent's graph (nodes, edges), as ``RemoteGraph.get_graph`` reads it."""
        agent = self._agent(check_id(request.path_params.get("assistant_id"), "assistant_id"))
        xray = request.query_params.get("xray", "false").lower() in ("1", "true")
        return JSONResponse(agent.graph.get_graph(xray=xray).to_json())

    async def assistant_schemas(self, request: Request, actor: Actor) -> Response:
        """``GET /assistants/{id}/schemas``: the graph's JSON schemas (``None`` where one cannot be made)."""
        name = check_id(request.path_params.get("assistant_id"), "assistant_id")
        graph = self._agent(name).graph

        def made(method: str) -> Any:
            try:
                return getattr(graph, method)()
            except Exception:  # a schema pydantic cannot express: the API says "missing" with None
                return None

        return JSONResponse(
            {
                "graph_id": name,
                "input_schema": made("get_input_jsonschema"),
                "output_schema": made("get_output_jsonschema"),
                "state_schema": None,
                "config_schema": None,
                "context_schema": made("get_context_jsonschema"),
            }
        )

    # --- threads -----------------------------------------------------------------------------------------

    async def _thread_dict(self, row: ThreadRow) -> Any:
        thread = self._thread(row)
        if thread is None:
            return schema.thread(row, False, None, None, {})
        busy = await thread.io(self.store.busy, row.thread_id)
        snapshot = await thread.snapshot()
        ids, turns = await thread.human_ids()
        return schema.thread(row, busy, snapshot, schema.last_ended(turns), ids)

    async def threads_create(self, request: Request, actor: Actor) -> Response:
        """``POST /threads``: a new thread of the caller's (``if_exists="do_nothing"`` returns an existing one)."""
        body = parse_thread(await read_json(request, self.max_body_bytes, required=False))
        thread_id = body.thread_id or str(uuid.uuid4())
        metadata = {**body.metadata, "owner": actor.user_id}
        row, created = await self.io(self.tables.create_thread, thread_id, actor_key(actor), metadata)
        if row is None or (not created and body.if_exists == "raise"):
            refuse(409, f"Thread {thread_id!r} exists already; choose another thread_id (or if_exists='do_nothing').")
        return JSONResponse(await self._thread_dict(row))

    async def threads_search(self, request: Request, actor: Actor) -> Response:
        """``POST /threads/search``: the caller's threads, newest first (filters: metadata, ids, status)."""
        limit, offset, body = parse_search(
            await read_json(request, self.max_body_bytes, required=False), ("metadata", "ids", "status")
        )
        wanted = body.get("metadata") or {}
        ids = body.get("ids")
        if not isinstance(wanted, Mapping) or (ids is not None and not isinstance(ids, list)):
            refuse(400, "`metadata` must be an object and `ids` a list of thread ids.")
        for given in ids or ():
            check_id(given, "ids")
        rows: list[ThreadRow] = await self.io(self.tables.threads, actor_key(actor), 10_000, 0)
        found = []
        for row in rows:
            if ids is not None and row.thread_id not in ids:
                continue
            if any(row.metadata.get(k) != v for k, v in wanted.items()):
                continue
            item = await self._thread_dict(row)
            if body.get("status") not in (None, item["status"]):
                continue
            found.append(item)
            if len(found) >= offset + limit:
                break
        return JSONResponse(found[offset:])

    async def thread_get(self, request: Request, actor: Actor) -> Response:
        """``GET /threads/{id}`` (``PATCH`` merges ``{"metadata"}`` into the thread's)."""
        row = await self._row(request, actor)
        if request.method == "PATCH":
            body = await read_json(request, self.max_body_bytes)
            metadata = body.get("metadata")
            if set(body) - {"metadata"} or not isinstance(metadata, Mapping):
                refuse(400, 'A thread update takes only {"metadata": {...}}.')
            await self.io(self.tables.update_metadata, row.thread_id, {**metadata, "owner": actor.user_id})
            row = await self._row(request, actor)
        return JSONResponse(await self._thread_dict(row))

    async def thread_state(self, request: Request, actor: Actor) -> Response:
        """``GET /threads/{id}/state``: the thread's current checkpoint.

        ``GET .../state/{checkpoint_id}`` and ``POST .../state/checkpoint`` (``{"checkpoint": {...}}``, what
        ``RemoteGraph.get_state`` sends) read one checkpoint of the thread (its head when the checkpoint names none).
        """
        row = await self._row(request, actor)
        given = request.path_params.get("checkpoint_id")
        checkpoint_id = None
        if request.method == "POST":
            if given != "checkpoint":
                _unserved()
            body = await read_json(request, self.max_body_bytes)
            if set(body) - {"checkpoint", "subgraphs", "select"}:
                refuse(400, "Unknown field(s) in the body; a state read takes checkpoint, subgraphs and select.")
            checkpoint_id = parse_checkpoint(body.get("checkpoint"), row.thread_id)
        elif given is not None:
            checkpoint_id = check_id(given, "checkpoint_id")
        thread = self._thread(row)
        if thread is None:
            if checkpoint_id is not None:
                refuse(404, f"Thread {row.thread_id!r} has no checkpoint {checkpoint_id!r}.")
            return JSONResponse(schema.thread_state(None, row.thread_id, {}))
        if checkpoint_id is None:
            snapshot = await thread.snapshot()
        else:
            config = {"configurable": {"thread_id": row.thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
            snapshot = await thread.agent.graph.aget_state(config)
            if snapshot.created_at is None:
                refuse(404, f"Thread {row.thread_id!r} has no checkpoint {checkpoint_id!r}.")
        ids, _ = await thread.human_ids()
        return JSONResponse(schema.thread_state(snapshot, row.thread_id, ids))

    async def thread_history(self, request: Request, actor: Actor) -> Response:
        """``POST /threads/{id}/history``: the thread's checkpoints, newest first."""
        row = await self._row(request, actor)
        limit, before, start, metadata = parse_history(
            await read_json(request, self.max_body_bytes, required=False), row.thread_id
        )
        thread = self._thread(row)
        if thread is None:
            return JSONResponse([])
        before_config = (
            None if before is None else {"configurable": {"thread_id": row.thread_id, "checkpoint_id": before}}
        )
        config = thread.config
        if start is not None:  # the checkpointer's own reading of a config that names a checkpoint
            config = {"configurable": {"thread_id": row.thread_id, "checkpoint_ns": "", "checkpoint_id": start}}
        ids, _ = await thread.human_ids()
        states = [
            schema.thread_state(snapshot, row.thread_id, ids)
            async for snapshot in thread.agent.graph.aget_state_history(
                config, limit=limit, before=before_config, filter=metadata or None
            )
        ]
        return JSONResponse(states)

    # --- runs --------------------------------------------------------------------------------------------

    async def _start(self, request: Request, actor: Actor, thread_id: str | None) -> Started:
        body = parse_run(await read_json(request, self.max_body_bytes))
        return await start_run(
            request, actor, agents=self.agents, tables=self.tables, thread_id=thread_id, body=body, context=self.context
        )

    def _path_thread(self, request: Request) -> str | None:
        value = request.path_params.get("thread_id")
        return None if value is None else check_id(value, "thread_id")

    def _events(
        self, thread: Thread, session: Any, turn: TurnInfo, parts: RunParts, *, after: int, cancel: bool
    ) -> Response:
        source = thread.frames(session, turn, parts, after=after, metadata=after == 0)
        if cancel:
            source = self._cancel_on_disconnect(source, thread, turn.turn_id)
        path = _run_path(thread.thread_id, turn.turn_id)
        return EventStreamResponse(source, headers={"Content-Location": path, "Location": path + "/stream"})

    async def _cancel_on_disconnect(
        self, source: AsyncIterator[bytes], thread: Thread, run_id: str
    ) -> AsyncIterator[bytes]:
        """``on_disconnect="cancel"``: a client that leaves before the run's end cancels the run."""
        ended = False
        try:
            async for frame in source:
                yield frame
            ended = True
        finally:
            if not ended:
                try:
                    await cancel_run(thread, run_id)
                except (RequestError, UserError) as exc:
                    _log.info("run %s was not cancelled on disconnect: %s", run_id, exc)

    async def runs_stream(self, request: Request, actor: Actor) -> Response:
        """``POST /threads/{id}/runs/stream`` (and ``/runs/stream``): accept a run and stream it as SSE."""
        started = await self._start(request, actor, self._path_thread(request))
        thread, turn, body = started.thread, started.turn, started.body
        human = thread.human({"input": body.text}, turn.message_id) if body.text is not None else None
        parts = RunParts(
            run_id=turn.turn_id,
            thread_id=thread.thread_id,
            modes=body.stream_modes,
            human=human,
            subgraphs=body.subgraphs,
        )
        return self._events(thread, started.session, turn, parts, after=0, cancel=body.cancel_on_disconnect)

    async def runs_wait(self, request: Request, actor: Actor) -> Response:
        """``POST /threads/{id}/runs/wait`` (and ``/runs/wait``): accept a run, answer its end values."""
        started = await self._start(request, actor, self._path_thread(request))
        await started.thread.wait(started.session, started.turn)
        path = _run_path(started.thread.thread_id, started.turn.turn_id)
        result = await started.thread.result(started.turn.turn_id)
        return JSONResponse(result, headers={"Content-Location": path, "Location": path + "/join"})

    async def runs_create(self, request: Request, actor: Actor) -> Response:
        """``POST /threads/{id}/runs`` (``GET`` lists them): accept a background run; answer the run."""
        if request.method == "GET":
            return await self._runs_list(request, actor)
        started = await self._start(request, actor, self._path_thread(request))
        record = await self.io(self.tables.run, started.turn.turn_id)
        run = schema.run(started.turn, started.thread.thread_id, record, started.body.assistant_id)
        path = _run_path(started.thread.thread_id, started.turn.turn_id)
        return JSONResponse(run, headers={"Content-Location": path})

    async def _runs_list(self, request: Request, actor: Actor) -> Response:
        row = await self._row(request, actor)
        limit = parse_limit(request.query_params.get("limit"), 10)
        offset = parse_limit(request.query_params.get("offset"), 0, "offset", 2**31)
        status = request.query_params.get("status")
        turns: list[TurnInfo] = await self.io(self.tables.turns, row.thread_id)
        records = await self.io(self.tables.runs, row.thread_id)
        runs = [schema.run(t, row.thread_id, records.get(t.turn_id), row.assistant or "") for t in reversed(turns)]
        runs = [r for r in runs if status in (None, r["status"])]
        return JSONResponse(runs[offset : offset + limit])

    async def run_get(self, request: Request, actor: Actor) -> Response:
        """``GET /threads/{id}/runs/{run_id}``."""
        row, _, turn = await self._run(request, actor)
        record = await self.io(self.tables.run, turn.turn_id)
        return JSONResponse(schema.run(turn, row.thread_id, record, row.assistant or ""))

    async def run_join(self, request: Request, actor: Actor) -> Response:
        """``GET /threads/{id}/runs/{run_id}/join``: wait for the run's end (in any process); its end values."""
        _, thread, turn = await self._run(request, actor)
        session = await thread.io(lambda: thread.agent.session(thread.thread_id))
        await thread.wait(session, turn)
        return JSONResponse(await thread.result(turn.turn_id))

    async def run_stream(self, request: Request, actor: Actor) -> Response:
        """``GET /threads/{id}/runs/{run_id}/stream``: the run's stream again, after ``Last-Event-ID`` if sent.

        ``Last-Event-ID: -1`` (what the JS SDK's ``useStream`` sends to join a run) replays it from the start.
        """
        row, thread, turn = await self._run(request, actor)
        sent = request.headers.get("last-event-id") or None
        # "-1" is the protocol's "from the start": the JS SDK's useStream sends it on joinStream/reconnectOnMount.
        after = 0 if sent == "-1" else parse_cursor(sent, "Last-Event-ID") or 0
        record = await self.io(self.tables.run, turn.turn_id)
        options = record.options if record is not None else {}
        modes_given = [m for m in request.query_params.getlist("stream_mode") if m]  # the SDK sends an empty one
        if modes_given:
            modes = parse_stream_modes(modes_given if len(modes_given) > 1 else modes_given[0])
        else:
            modes = tuple(options.get("stream_mode") or ("values",))
        cancel = request.query_params.get("cancel_on_disconnect", "false").lower() in ("1", "true")
        session = await thread.io(lambda: thread.agent.session(thread.thread_id))
        stored = await self.io(self.store.turn, turn.turn_id)
        human = thread.human(stored.payload, turn.message_id)
        parts = RunParts(
            run_id=turn.turn_id,
            thread_id=row.thread_id,
            modes=modes,
            human=human,
            subgraphs=bool(options.get("stream_subgraphs")),
        )
        return self._events(thread, session, turn, parts, after=after, cancel=cancel)

    async def run_cancel(self, request: Request, actor: Actor) -> Response:
        """``POST /threads/{id}/runs/{run_id}/cancel?wait=0|1&action=interrupt``: 202 (204 once ended with wait)."""
        _, thread, turn = await self._run(request, actor)
        action = request.query_params.get("action", "interrupt")
        if action != "interrupt":
            refuse(400, f"`action` {action!r} is not supported here; use 'interrupt' (the run's messages stay).")
        await cancel_run(thread, turn.turn_id)
        if request.query_params.get("wait", "0").lower() in ("1", "true"):
            session = await thread.io(lambda: thread.agent.session(thread.thread_id))
            await thread.wait(session, turn)
            return Response(status_code=204)
        return Response(status_code=202)

    async def unsupported(self, request: Request, actor: Actor) -> Response:
        """Any other path under the API's prefixes: a JSON 404 naming what is served."""
        _unserved()


def _unserved() -> NoReturn:
    refuse(404, "This path is not served by this LangGraph API; it serves: " + "; ".join(SUPPORTED) + ".")


def _check(agents: Any, sessions: Any) -> dict[str, Any]:
    if not isinstance(sessions, SessionStore):
        raise UserError(
            f"langgraph_api_routes(sessions=...) needs the agents' session store (sqlite_sessions(path), "
            f"postgres_sessions(...)), got {type(sessions).__name__}."
        )
    if not isinstance(agents, Mapping) or not agents:
        raise UserError(
            "langgraph_api_routes(agents) needs a mapping of assistant id to agent, e.g. {'support': agent}."
        )
    names: dict[str, str] = {}
    for key, agent in agents.items():
        try:
            check_id(key, "assistant id")
        except RequestError:
            raise UserError(
                f"langgraph_api_routes: assistant id {key!r} must be 1-128 letters, digits, '.', '_' or '-'."
            ) from None
        if getattr(agent, "sessions", None) is not sessions:
            raise UserError(
                f"langgraph_api_routes: assistant {key!r} must be an Agent or DeepAgent built with sessions=<this "
                "store> (its threads are durable sessions in it)."
            )
        name = agent_name(agent)
        if name in names and agents[names[name]] is not agent:
            raise UserError(
                f"langgraph_api_routes: assistants {names[name]!r} and {key!r} are agents with the same name "
                f"{name!r}; sessions belong to an agent's name, so give each its own name=."
            )
        names[name] = key
    return dict(agents)


def langgraph_api_routes(
    agents: Mapping[str, Any],
    *,
    sessions: SessionStore,
    authenticate: Authenticate | None = None,
    max_body_bytes: int = 1_048_576,
    context: ContextHook | None = None,
) -> list[Route]:
    """Starlette routes that serve ``agents`` to LangGraph clients: the LangGraph Server API over durable sessions.

    ``langgraph-sdk`` (``get_client`` / ``get_sync_client``), ``RemoteGraph(url=...)``, the JS
    ``@langchain/langgraph-sdk`` ``Client`` and its ``useStream`` hook talk to these routes as to a LangGraph
    Server. An assistant is an agent (its key here is the assistant id and graph id); a thread is a durable
    session; a thread's runs are the session's turns; a run's stream is its turn's log, so any server
    process on the same store can stream, rejoin (``Last-Event-ID``), join or cancel it, and a run whose
    process died is continued by another (each process continues such runs every lease period; a client
    following the run takes it over as soon as its lease expires).

    - Stream modes ``values``, ``updates``, ``messages-tuple``, ``custom``: SSE frames ``metadata`` first,
      ``end`` last, each frame's ``id`` the cursor of the log line it came from.
    - An approval (``interrupt_on``) or ``interrupt()`` ends the run with ``__interrupt__`` in ``updates`` and
      ``values``; ``command={"resume": ...}`` answers it (LangChain's ``{"decisions": [{"type": "approve"}]}``
      and our ``"approve"`` / ``{"type": "edit", "args": ...}`` forms; ``{interrupt_id: value}`` for several).
    - ``multitask_strategy``: ``reject`` (default, 409), ``enqueue``, ``interrupt``, ``rollback`` (the session's
      ``on_busy``, SPEC §14b).
    - A thread belongs to the actor that created it (``metadata.owner``): another actor gets a 404.
      Without ``authenticate=`` every request is a 401.
    - Errors are the JSON error object (plus ``code``); paths under ``/assistants``, ``/threads``, ``/runs``,
      ``/crons``, ``/store`` that are not served (or another method on a served path) are a 404 naming the
      served ones.

    Example:
        ```python
        app = Starlette(routes=langgraph_api_routes({"support": agent}, sessions=store, authenticate=check))
        client = get_sync_client(url="http://127.0.0.1:8000", headers={"authorization": "Bearer ..."})
        ```

    Args:
        agents: assistant id -> `Agent` / `DeepAgent`, each built with ``sessions=`` this store (distinct names).
        sessions: the session store of the agents.
        authenticate: ``(request) -> Actor | None``, sync or async (``None`` -> 401).
        max_body_bytes: the largest body read (413 beyond).
        context: ``(request, actor) -> context`` for the tools; when set, a body ``context`` is refused.

    Returns:
        The routes (mount them at the root of the API's base URL).

    Raises:
        UserError: a bad option, an agent without this session store, two agents with one name.
    """
    check_options("langgraph_api_routes", "/", "ndjson", max_body_bytes, authenticate, context)
    api = _Api(_check(agents, sessions), sessions, max_body_bytes, context)
    h = api.handler
    t = "/threads/{thread_id}"
    r = t + "/runs/{run_id}"
    table: list[tuple[str, Handler, tuple[str, ...]]] = [
        ("/assistants/search", api.assistants_search, ("POST",)),
        ("/assistants/{assistant_id}", api.assistant_get, ("GET",)),
        ("/assistants/{assistant_id}/graph", api.assistant_graph, ("GET",)),
        ("/assistants/{assistant_id}/schemas", api.assistant_schemas, ("GET",)),
        ("/threads", api.threads_create, ("POST",)),
        ("/threads/search", api.threads_search, ("POST",)),
        (t, api.thread_get, ("GET", "PATCH")),
        (t + "/state", api.thread_state, ("GET",)),
        (t + "/state/{checkpoint_id}", api.thread_state, ("GET", "POST")),
        (t + "/history", api.thread_history, ("POST",)),
        (t + "/runs", api.runs_create, ("GET", "POST")),
        (t + "/runs/stream", api.runs_stream, ("POST",)),
        (t + "/runs/wait", api.runs_wait, ("POST",)),
        (r, api.run_get, ("GET",)),
        (r + "/join", api.run_join, ("GET",)),
        (r + "/stream", api.run_stream, ("GET",)),
        (r + "/cancel", api.run_cancel, ("POST",)),
        ("/runs/stream", api.runs_stream, ("POST",)),
        ("/runs/wait", api.runs_wait, ("POST",)),
    ]
    routes = [_route(path, h(fn), methods, authenticate, f"langgraph:{path}") for path, fn, methods in table]
    for prefix in _PREFIXES:
        for path in (f"/{prefix}", f"/{prefix}/{{rest:path}}"):
            routes.append(_route(path, h(api.unsupported), _EVERYTHING, authenticate, f"langgraph:unsupported:{path}"))
    return routes


def _route(
    path: str, handler: Handler, methods: tuple[str, ...], authenticate: Authenticate | None, name: str
) -> Route:
    """The house's route (``authenticate`` first), its errors with the LangGraph API's ``code`` too.

    Another method on a served path is an unserved endpoint, a 404 like any other (not the house's 405): the
    SDK's ``threads.delete``, ``runs.delete``, ``threads.count`` (``POST /threads/count`` matches
    ``/threads/{thread_id}``) must raise its ``NotFoundError``.
    """

    async def served(request: Request, actor: Actor) -> Response:
        if request.method not in methods:
            _unserved()
        return await handler(request, actor)

    inner = endpoint(served, _EVERYTHING, authenticate)

    async def run(request: Request) -> Response:
        response = await inner(request)
        if response.status_code >= 400 and isinstance(response, JSONResponse):
            return _with_code(response)
        return response

    return Route(path, run, methods=list(_EVERYTHING), name=name)
