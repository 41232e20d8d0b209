"""The run guards every graph wrapper (`Agent`, `DeepAgent`) puts innermost in its middleware stack.

- `StructuredOutputGuard`: with ``output=M`` a final answer must validate into ``M``. ``create_agent`` alone
  either loops until the recursion limit (no tools: its model->model edge retries forever), ends with the raw
  text (tools or ``max_iterations``), or raises its own error without a retry. The guard validates each final
  answer, feeds the validation error back up to ``retries`` times (the sans-IO loop `Chain` uses, in
  ``ai_utils._structured``) and then raises `ModelOutputError`. The retry messages live only inside one model
  step; the thread keeps the accepted answer alone.
- `exit_is_an_error`: a tool that raises ``SystemExit``/``KeyboardInterrupt`` (or any other non-``Exception``)
  would escape asyncio's task machinery and stop the whole server; inside this block it becomes an ordinary
  `ToolAbortedError` that ends only this run. The tool-loop middleware (`ai_utils._run.toolloop`) runs every
  tool call in it; deepagents builds its subagents (the general-purpose one too) without the main agent's
  middleware, so `DeepAgent` also hands them `guard_tool` copies of its tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.structured_output import StructuredOutputError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from pydantic import BaseModel

from ai_utils._structured import InvalidReply, _Attempts, check_retries, parse_json_reply

__all__ = ["StructuredOutputGuard", "ToolAbortedError", "exit_is_an_error", "guard_tool", "guards"]


class ToolAbortedError(RuntimeError):
    """A tool raised a ``BaseException`` that is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``)."""


def _ai_message(result: list[BaseMessage]) -> AIMessage | None:
    return next((m for m in result if isinstance(m, AIMessage)), None)


class _Step:
    """One model step's attempts: judge each response, build the next request, raise when none is left."""

    def __init__(self, schema: type[BaseModel], retries: int, request: ModelRequest) -> None:
        self.schema = schema
        self.request = request
        self.extra: list[Any] = []
        self.attempts = _Attempts[Any](
            [],
            lambda reply, last: reply,
            retries=retries,
            what=f"the agent's `{schema.__name__}` output",
            fix=f"make the `{schema.__name__}` fields easier to fill (descriptions, optional fields), raise "
            "`retries`, or use a stronger model.",
        )

    def next_request(self) -> ModelRequest:
        self.attempts.start()
        if not self.extra:
            return self.request
        return self.request.override(messages=[*self.request.messages, *self.extra])

    def judge(self, response: ModelResponse) -> ModelResponse:
        """The response to keep; `InvalidReply` (with ``self.extra`` set for the retry) when it must be retried."""
        if response.structured_response is not None:
            return response
        message = _ai_message(response.result)
        if message is None:
            return response
        feedback = [m for m in response.result if isinstance(m, ToolMessage)]
        if feedback:  # the tool strategy rejected the schema tool's arguments and wrote why
            self.extra = [message, *feedback]
            raise InvalidReply(str(feedback[0].text), output=str(message.tool_calls[0].get("args")))
        if message.tool_calls:  # an ordinary tool round, not the final answer yet
            return response
        try:
            parsed = parse_json_reply(message.text, self.schema)
        except InvalidReply as invalid:
            self.extra = [message, self._retry_prompt(invalid)]
            raise
        return ModelResponse(result=response.result, structured_response=parsed)

    def rejected(self, error: StructuredOutputError) -> InvalidReply:
        """The provider strategy raised: feed its message back."""
        message = getattr(error, "ai_message", None)
        invalid = InvalidReply(str(error), output=message.text if isinstance(message, AIMessage) else None)
        self.extra = [*([message] if isinstance(message, AIMessage) else []), self._retry_prompt(invalid)]
        return invalid

    def _retry_prompt(self, invalid: InvalidReply) -> HumanMessage:
        return HumanMessage(
            f"Your reply was rejected: {invalid.message}\n"
            f"Reply again with one JSON object matching the `{self.schema.__name__}` schema, fixing exactly this."
        )


class StructuredOutputGuard(AgentMiddleware[AgentState[Any], Any, Any]):
    """Validate final answers against ``schema``; retry with the error, then raise `ModelOutputError`."""

    def __init__(self, schema: type[BaseModel], *, retries: int = 2) -> None:
        super().__init__()
        self.schema = schema
        self.retries = check_retries(retries)

    @property
    def name(self) -> str:
        """Middleware name (unique in the stack)."""
        return "ai_utils.StructuredOutputGuard"

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        """Call the model until its final answer validates (at most ``retries`` extra calls)."""
        step = _Step(self.schema, self.retries, request)
        while True:
            try:
                return step.judge(handler(step.next_request()))
            except StructuredOutputError as error:
                step.attempts.failed(step.rejected(error))
            except InvalidReply as invalid:
                step.attempts.failed(invalid)

    def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Coroutine[Any, Any, ModelResponse]:
        """Async twin of `wrap_model_call` (a plain method: see `ai_utils._run.hooks`)."""
        return self._aretry(request, handler)

    async def _aretry(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        step = _Step(self.schema, self.retries, request)
        while True:
            try:
                return step.judge(await handler(step.next_request()))
            except StructuredOutputError as error:
                step.attempts.failed(step.rejected(error))
            except InvalidReply as invalid:
                step.attempts.failed(invalid)


@contextlib.contextmanager
def exit_is_an_error(request: ToolCallRequest | str) -> Iterator[None]:
    """Inside the block, a tool's ``SystemExit``/``KeyboardInterrupt`` becomes `ToolAbortedError`.

    Cancellation and generator shutdown pass through: they are how asyncio and LangGraph stop a run.
    """
    try:
        yield
    except Exception:
        raise
    except (GeneratorExit, asyncio.CancelledError):
        raise
    except BaseException as error:
        name = request if isinstance(request, str) else request.tool_call["name"]
        raise ToolAbortedError(
            f"Tool {name!r} raised {type(error).__name__}({error}); the run was ended. Tools must raise an "
            "Exception (or return an error text), never exit the process."
        ) from error


def guards(output: type[BaseModel] | None, retries: int) -> list[AgentMiddleware[Any, Any, Any]]:
    """The guard middleware for one wrapper, to append last (innermost) to its stack.

    The tool guard is part of the tool-loop middleware, first in the stack (`ai_utils._run.toolloop`).
    """
    return [StructuredOutputGuard(output, retries=retries)] if output is not None else []


def guard_tool(tool: BaseTool) -> BaseTool:
    """A copy of ``tool`` whose ``SystemExit``/``KeyboardInterrupt`` becomes `ToolAbortedError` (StructuredTools).

    Other tool classes are returned unchanged (their calls in the main graph are still guarded by the
    middleware). ``functools.wraps`` keeps the signature LangChain reads for injected ``config``/``callbacks``.
    """
    if not isinstance(tool, StructuredTool):
        return tool
    update: dict[str, Any] = {}
    func, coroutine = tool.func, tool.coroutine
    if func is not None:

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            with exit_is_an_error(tool.name):
                return func(*args, **kwargs)

        update["func"] = run
    if coroutine is not None:

        @functools.wraps(coroutine)
        async def arun(*args: Any, **kwargs: Any) -> Any:
            with exit_is_an_error(tool.name):
                return await coroutine(*args, **kwargs)

        update["coroutine"] = arun
    return tool.model_copy(update=update)
