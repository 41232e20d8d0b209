"""`session_routes`: durable sessions over HTTP: create, prompt, stream (reconnect by cursor), steer, cancel."""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ai_utils.exceptions import UserError
from ai_utils.gateway.actor import Actor
from ai_utils.server._bodies import OnBusy, Protocol, RunRequest, check_id, parse_body
from ai_utils.server._options import ContextHook, blocking, check_options, run_context
from ai_utils.server._owners import Owners
from ai_utils.server._request import Authenticate, actor_key, parse_cursor, read_json, refuse, route
from ai_utils.server._respond import encoder_for, stream_response

__all__ = ["session_routes"]

_STEER_KEYS = ("text", "message_id", "context")


class _Sessions:
    """The endpoints of one agent's session routes (one object, so each route is a short method)."""

    def __init__(
        self,
        agent: Any,
        base: str,
        protocol: Protocol,
        max_body_bytes: int,
        context: ContextHook | None,
        on_busy: OnBusy,
    ) -> None:
        self.agent = agent
        self.on_busy = on_busy
        self.base = base
        self.store = agent.sessions
        self.owners = Owners(self.store, str(agent.name))
        self.protocol = protocol
        self.max_body_bytes = max_body_bytes
        self.context = context

    # --- lookups -----------------------------------------------------------------------------------------

    async def _owned(self, request: Request, actor: Actor) -> str:
        """The path's session id, when the actor owns it; else 404 (unknown and another's look the same)."""
        session_id = check_id(request.path_params.get("session_id"), "session id")
        if not await blocking(self.store, self.owners.owns, session_id, actor_key(actor)):
            refuse(404, f"There is no session {session_id!r} for you; create one with POST to the sessions path.")
        return session_id

    async def _open(self, session_id: str, ctx: Any) -> Any:
        return await blocking(self.store, lambda: self.agent.session(session_id, context=ctx))

    # --- prompting ---------------------------------------------------------------------------------------

    async def _prompt(self, request: Request, actor: Actor, session_id: str, body: RunRequest) -> Response:
        ctx = await run_context(self.context, request, actor, body)
        session = await self._open(session_id, ctx)
        before = (
            body.cursor if body.cursor is not None else await blocking(self.store, self.store.last_cursor, session_id)
        )
        turn = await session.aprompt(
            body.input,
            message_id=body.message_id,
            decision=body.decision,
            decisions=body.decisions,
            on_busy=body.on_busy or self.on_busy,
        )
        if turn.repeated and body.cursor is None:
            row = await blocking(self.store, self.store.turn, turn.id)
            if row is not None and row.first_cursor is not None:
                before = min(before, row.first_cursor - 1)  # a retry follows the original turn from its start
        return self._stream(session, before, message_id=body.continues, known=body.known_tool_calls)

    def _stream(
        self, session: Any, cursor: int, *, message_id: str | None = None, known: tuple[str, ...] = ()
    ) -> Response:
        lines = session.astream(cursor)
        headers = {"X-Session-Id": session.id}
        if self.protocol == "ndjson":
            return stream_response("ndjson", lines, headers=headers)
        encoder = encoder_for(
            self.protocol, thread_id=session.id, session=True, message_id=message_id, known_tool_calls=known
        )
        return stream_response(self.protocol, lines, encoder=encoder, headers=headers)

    async def create(self, request: Request, actor: Actor) -> Response:
        """``POST {path}``: a new session (ndjson: ``{"session_id"}``, 201).

        AG-UI / AI SDK: create (or continue) the session the body's thread id names, and stream the turn.
        """
        owner = actor_key(actor)
        if self.protocol == "ndjson":
            body = await read_json(request, self.max_body_bytes, required=False)
            if body:
                refuse(400, "Unknown field(s) in the body; creating a session takes an empty body.")
            session_id = uuid.uuid4().hex
            if not await blocking(self.store, self.owners.claim, session_id, owner):  # pragma: no cover - a new uuid
                refuse(500, "Could not create a session; try again.")
            # root_path: the prefix the routes are mounted under (`Mount("/api", routes=...)`), which the client sees.
            location = f"{request.scope.get('root_path', '')}{self.base}/{session_id}"
            return JSONResponse({"session_id": session_id}, status_code=201, headers={"Location": location})
        run = parse_body(self.protocol, await read_json(request, self.max_body_bytes), session=True)
        assert run.thread_id is not None
        if not await blocking(self.store, self.owners.claim, run.thread_id, owner):
            refuse(404, f"There is no session {run.thread_id!r} for you; start a new thread.")
        return await self._prompt(request, actor, run.thread_id, run)

    async def prompt(self, request: Request, actor: Actor) -> Response:
        """``POST {path}/{id}/prompt``: store a prompt (or a decision) and stream from before it."""
        session_id = await self._owned(request, actor)
        run = parse_body(self.protocol, await read_json(request, self.max_body_bytes), session=True)
        if run.thread_id is not None and run.thread_id != session_id:
            refuse(400, "The body names another thread than the path; send it to that session's path.")
        return await self._prompt(request, actor, session_id, run)

    async def stream(self, request: Request, actor: Actor) -> Response:
        """``GET {path}/{id}/stream?cursor=n``: every stored line after ``n``, then live until the session is idle.

        SSE clients may send ``Last-Event-ID`` instead. Without either, NDJSON and AG-UI replay from 0; the AI
        SDK's reconnect gets the running turn from its start, or 204 when no turn runs.
        """
        session_id = await self._owned(request, actor)
        cursor = parse_cursor(request.query_params.get("cursor"))
        if cursor is None and self.protocol != "ndjson":
            cursor = parse_cursor(request.headers.get("last-event-id"), "Last-Event-ID")
        session = await self._open(session_id, None)
        if cursor is None and self.protocol == "vercel-ai":
            row = await blocking(self.store, self.store.next_turn, session_id)
            if row is None:
                return Response(status_code=204)
            first = row.first_cursor
            cursor = first - 1 if first is not None else await blocking(self.store, self.store.last_cursor, session_id)
        return self._stream(session, cursor or 0)

    async def steer(self, request: Request, actor: Actor) -> Response:
        """``POST {path}/{id}/steer`` ``{"text", "message_id"?}``: join the running turn (or become the next)."""
        session_id = await self._owned(request, actor)
        body = await read_json(request, self.max_body_bytes)
        unknown = sorted(set(body) - set(_STEER_KEYS))
        if unknown:
            refuse(400, "Unknown field(s) in the body; a steer takes text, message_id and context.")
        text, message_id = body.get("text"), body.get("message_id")
        if not isinstance(text, str) or not text.strip():
            refuse(400, "`text` must be a non-empty string.")
        if message_id is not None:
            check_id(message_id, "message_id")
        run = RunRequest(context=body.get("context"), has_context="context" in body)
        session = await self._open(session_id, await run_context(self.context, request, actor, run))
        steered = await blocking(self.store, lambda: session.steer(text, message_id=message_id))
        return JSONResponse({"session_id": session_id, "message_id": steered}, status_code=202)

    async def cancel(self, request: Request, actor: Actor) -> Response:
        """``POST {path}/{id}/cancel``: cancel the running and queued turns (each ends ``cancelled``)."""
        session_id = await self._owned(request, actor)
        body = await read_json(request, self.max_body_bytes, required=False)
        if body:
            refuse(400, "Unknown field(s) in the body; a cancel takes an empty body.")
        session = await self._open(session_id, None)
        await blocking(self.store, session.cancel)
        return JSONResponse({"session_id": session_id, "cancelled": True}, status_code=202)


def session_routes(
    agent: Any,
    *,
    path: str = "/sessions",
    authenticate: Authenticate | None = None,
    protocol: Protocol = "ndjson",
    max_body_bytes: int = 1_048_576,
    context: ContextHook | None = None,
    on_busy: OnBusy = "enqueue",
) -> list[Route]:
    """Starlette routes for ``agent``'s durable sessions (mount them in FastAPI too).

    - ``POST {path}``: a new session, owned by the caller: ``201 {"session_id"}`` (ndjson). With
      ``"ag-ui"`` / ``"vercel-ai"`` the body is the protocol's run request and its thread id names the
      session: created (owned by the caller) if new, then prompted, and the turn is streamed.
    - ``POST {path}/{id}/prompt``: ``{"input"?, "message_id"?, "decision"?, "decisions"?, "cursor"?,
      "context"?, "on_busy"?}`` (or the protocol's body): stored before it is acknowledged; streams the
      session's log from ``cursor`` (default: where it stood before this prompt) until the session is idle.
      ``input`` is the user's text or a list of content blocks (text and images, as `Session.prompt` takes).
      While another turn of the session runs, ``on_busy`` decides (as `Session.prompt`): ``"reject"``
      answers 409 with the JSON error object (``code: "SESSION_BUSY"``) and stores nothing; ``"enqueue"``,
      ``"interrupt"`` and ``"rollback"`` stream as usual.
    - ``GET {path}/{id}/stream?cursor=n``: the reconnect route: every stored line after ``n``, then live
      (SSE: also ``Last-Event-ID``; each event's ``id`` is its line's cursor; the AI SDK's reconnect without a
      cursor gets the running turn from its start, or 204).
    - ``POST {path}/{id}/steer`` ``{"text", "message_id"?}`` -> 202; ``POST {path}/{id}/cancel`` -> 202.

    A session belongs to the actor that created it (stored in the session store beside the session):
    another actor's session, and a session created outside these routes, is a 404 and never shows a line.
    Authentication and errors as for `agent_routes` (no ``authenticate`` -> every request is a 401).

    Example:
        ```python
        app = Starlette(routes=session_routes(agent, authenticate=check_token))
        ```

    Args:
        agent: an `Agent` or `DeepAgent` built with ``sessions=``.
        path: the routes' prefix.
        authenticate: ``(request) -> Actor | None``, sync or async.
        protocol: ``"ndjson"``, ``"ag-ui"`` or ``"vercel-ai"``.
        max_body_bytes: the largest body read (413 beyond).
        context: ``(request, actor) -> context`` for the session's tools; when set, a body ``context`` is
            refused.
        on_busy: the double-texting strategy of a prompt that names none (AG-UI and AI SDK bodies cannot):
            ``"enqueue"`` (default), ``"reject"``, ``"interrupt"`` or ``"rollback"``.

    Returns:
        The five routes.

    Raises:
        UserError: a bad option, or an agent without ``sessions=``.
    """
    path = check_options("session_routes", path, protocol, max_body_bytes, authenticate, context)
    if on_busy not in ("enqueue", "reject", "interrupt", "rollback"):
        raise UserError(f"session_routes(on_busy={on_busy!r}): use 'enqueue', 'reject', 'interrupt' or 'rollback'.")
    if getattr(agent, "sessions", None) is None:
        raise UserError("session_routes(agent) needs an agent built with sessions= (e.g. sqlite_sessions(path)).")
    base = "" if path == "/" else path
    routes = _Sessions(agent, base, protocol, max_body_bytes, context, on_busy)
    item = base + "/{session_id}"
    return [
        route(base or "/", routes.create, ("POST",), authenticate, f"session_create:{path}"),
        route(item + "/prompt", routes.prompt, ("POST",), authenticate, f"session_prompt:{path}"),
        route(item + "/stream", routes.stream, ("GET",), authenticate, f"session_stream:{path}"),
        route(item + "/steer", routes.steer, ("POST",), authenticate, f"session_steer:{path}"),
        route(item + "/cancel", routes.cancel, ("POST",), authenticate, f"session_cancel:{path}"),
    ]
