"""`agent_routes`: one POST route that streams an agent run, in NDJSON, AG-UI or the Vercel UI message stream."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import HumanMessage
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ai_utils.gateway.actor import Actor
from ai_utils.server._bodies import Protocol, RunRequest, parse_body
from ai_utils.server._options import ContextHook, check_options, run_context
from ai_utils.server._request import Authenticate, actor_key, read_json, refuse, route
from ai_utils.server._respond import encoder_for, stream_response
from ai_utils.sessions._content import ahuman_content

__all__ = ["OWNER_KEY", "agent_routes"]

OWNER_KEY = "ai_utils_owner"
"""Checkpoint metadata key naming the actor whose requests wrote a thread (``agent_routes`` stamps every run)."""


async def _check_owner(agent: Any, thread_id: str, owner: str) -> None:
    """A thread that exists belongs to the actor whose runs wrote it; any other thread is unknown here (404)."""
    state = await agent.aget_state(thread_id)
    if state.created_at is None:
        return  # a new thread: this run makes it the actor's
    if (state.metadata or {}).get(OWNER_KEY) != owner:
        refuse(404, f"There is no thread {thread_id!r} for you; start a new one (leave the thread id out).")


def agent_routes(
    agent: Any,
    *,
    path: str = "/agent",
    authenticate: Authenticate | None = None,
    protocol: Protocol = "ndjson",
    max_body_bytes: int = 1_048_576,
    context: ContextHook | None = None,
    show_reasoning: bool = False,
) -> list[Route]:
    """Starlette routes that run ``agent`` over HTTP: ``POST {path}`` streams one run (mount them in FastAPI too).

    The body, by ``protocol``:

    - ``"ndjson"``: ``{"input"?, "thread_id"?, "decision"?, "decisions"?, "context"?}`` (``input``: the text, or
      content blocks as `Session.prompt` takes them: ``{"type": "text", "text"}``, ``{"type": "image", "data":
      <base64>, "mime_type"}``, ``{"type": "image_url", "url": "data:image/...;base64,..."}``); the answer is
      ``application/x-ndjson`` (`StreamResponse`: one chunk a line) with the thread in ``X-Thread-Id``;
    - ``"ag-ui"``: AG-UI's ``RunAgentInput`` (``threadId`` is the thread, the last user message the input with
      its ``image`` parts, ``resume`` answers an approval); the answer is AG-UI events as SSE;
    - ``"vercel-ai"``: the AI SDK's ``{id, messages}`` (``id`` is the thread, the last user message the input
      with its image ``file`` parts; an assistant message with ``approval-responded`` tool parts answers an
      approval); the answer is a UI message stream.

    Images reach the model as LangChain's standard image blocks, checked as a session prompt's are (PNG, JPEG,
    GIF or WebP by their bytes, data URLs only, at most 8, 3.75 MiB each, 6 MiB together; the agent's
    ``resize_image`` first): a bad one is a 400, never dropped. Raise ``max_body_bytes`` for large images.

    Every request is authenticated first: ``authenticate(request)`` returns the `Actor` or ``None`` (401).
    Without ``authenticate`` every request is refused with 401 (deny by default: pass a function; for a
    local demo, one that returns a fixed ``Actor``). With a checkpointer, a thread belongs to the actor whose
    request started it (stamped into its checkpoints' metadata as ``ai_utils_owner``): another actor's
    thread, or one written outside these routes, is a 404. Errors before the first line are the §5 error
    object as JSON: 400 (bad JSON or fields, a `UserError`), 401, 404, 405, 413 (body over
    ``max_body_bytes``), 415 (not ``application/json``), 500 (generic text and an ``error_id``).

    Example:
        ```python
        app = Starlette(routes=agent_routes(agent, authenticate=check_token))   # FastAPI: app.router.routes.extend(...)
        ```

    Args:
        agent: an `Agent` or `DeepAgent` (a checkpointer is needed for threads and approvals).
        path: the route's path.
        authenticate: ``(request) -> Actor | None``, sync or async.
        protocol: ``"ndjson"``, ``"ag-ui"`` or ``"vercel-ai"``.
        max_body_bytes: the largest body read (413 beyond; never read further).
        context: ``(request, actor) -> context`` for the tools (sync or async); when set, a body ``context``
            is refused. Without it the body's ``context`` (ndjson) is passed on as the client sent it.
        show_reasoning: stream the model's reasoning too.

    Returns:
        ``[Route(path, ...)]``.

    Raises:
        UserError: a bad option.
    """
    path = check_options("agent_routes", path, protocol, max_body_bytes, authenticate, context)
    stateful = getattr(agent, "checkpointer", None) is not None

    async def run(request: Request, actor: Actor) -> Response:
        body = parse_body(protocol, await read_json(request, max_body_bytes))
        ctx = await run_context(context, request, actor, body)
        message = await _message(body.input)  # images checked before the response starts: a bad one is a 400
        return await _stream(request, actor, body, ctx, message)

    async def _message(input: str | list[dict[str, Any]] | None) -> str | HumanMessage | None:
        """The run's input: the text, or (content blocks) one `HumanMessage` with the images a session would send."""
        if not isinstance(input, list):
            return input
        link = getattr(agent, "_sessions_link", None)  # the agent's `resize_image` (given with `sessions=`)
        return HumanMessage(await ahuman_content(input, getattr(link, "resize_image", None)))

    async def _stream(
        request: Request, actor: Actor, body: RunRequest, ctx: Any, message: str | HumanMessage | None
    ) -> Response:
        thread_id = body.thread_id
        config = None
        if stateful:
            thread_id = thread_id or uuid.uuid4().hex
            owner = actor_key(actor)
            await _check_owner(agent, thread_id, owner)
            config = {"metadata": {OWNER_KEY: owner}}
        chunks = agent.astream(
            message,
            thread_id=thread_id if stateful else None,
            decision=body.decision,
            decisions=body.decisions,
            context=ctx,
            config=config,
            show_tool_calls=True,
            show_reasoning=show_reasoning,
        )
        if protocol == "ndjson":
            return stream_response(protocol, chunks, headers={"X-Thread-Id": thread_id} if thread_id else None)
        encoder = encoder_for(
            protocol,
            thread_id=thread_id,
            run_id=body.run_id,
            message_id=body.continues,
            known_tool_calls=body.known_tool_calls,
        )
        return stream_response(protocol, chunks, encoder=encoder)

    return [route(path, run, ("POST",), authenticate, f"agent_run:{path}")]
