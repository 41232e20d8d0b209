"""One `Gateway.complete` / `Gateway.stream` call before it runs: messages, text-only stripping, options.

`prepare_call` turns the caller's request into a `PreparedCall`: the messages as LangChain messages (stripped to
text on a text-only route), the route's model with tools and per-request options bound in the provider's terms
(`ai_utils.llm._request.bind_request`), and the `DroppedContentReport` of what is left out, handed to
``on_dropped_content`` before the provider call. Under ``strict_text_only`` non-text content is not stripped:
the call gets a refusal rule the gateway appends to its policy chain, so it is blocked (row, event,
`GatewayError`) exactly like a policy denial, before any provider call.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

from langchain_core.runnables import RunnableConfig
from langchain_core.utils.uuid import uuid7

from ai_utils.gateway.completion import GatewayResponse, GatewayStream, StreamChunk, response_from
from ai_utils.gateway.dropped import (
    NOTHING_DROPPED,
    DroppedContentReport,
    OnDroppedContent,
    as_messages,
    log_dropped_content,
    report_dropped_content,
    strip_non_text,
)
from ai_utils.gateway.errors import GatewayError
from ai_utils.gateway.policy import PolicyContext, PolicyDecision, PolicyRule

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel, LanguageModelInput
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.runnables import Runnable

    from ai_utils.gateway.actor import Actor
    from ai_utils.gateway.callbacks import GatewayCallbackHandler
    from ai_utils.gateway.route import Route
    from ai_utils.llm._request import RequestOptions, ResponseFormat

__all__ = ["PreparedCall", "Request", "prepare_call"]


class Request(NamedTuple):
    """The keyword arguments of `Gateway.complete` / `stream`, in their order."""

    actor: Actor | Mapping[str, Any] | None
    metadata: Mapping[str, Any] | None
    tools: Sequence[Any] | None
    temperature: float | None
    max_tokens: int | None
    response_format: ResponseFormat | None
    betas: Sequence[str] | None
    parent_run_id: str | UUID | None
    strict_text_only: bool
    on_dropped_content: OnDroppedContent | None

    def options(self) -> RequestOptions:
        """The per-request options that were asked for."""
        options: RequestOptions = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        if self.response_format is not None:
            options["response_format"] = self.response_format
        if self.betas is not None:
            options["betas"] = self.betas
        return options


@dataclass
class PreparedCall:
    """A call ready to run: ``runnable.invoke(messages, config=config)``, then `response` (or `stream`).

    ``handler`` and ``config["callbacks"]`` are set by the gateway.
    """

    route: Route
    runnable: Runnable[LanguageModelInput, AIMessage]
    messages: LanguageModelInput
    dropped: DroppedContentReport
    refusal: PolicyRule | None
    started: float
    config: RunnableConfig = field(default_factory=lambda: RunnableConfig())
    handler: GatewayCallbackHandler | None = None

    def response(self, message: BaseMessage) -> GatewayResponse:
        """The `GatewayResponse` for the reply, named after the audit row it was written as."""
        entry = self.handler.last_entry if self.handler is not None else None
        return response_from(
            message,
            request_id=entry.request_id if entry is not None else str(self.config["run_id"]),
            model=entry.model if entry is not None else self.route.model,
            provider=self.route.provider,
            decisions=self.handler.last_decisions if self.handler is not None else (),
            started=self.started,
            dropped=self.dropped,
        )

    def stream(self, chunks: Iterator[StreamChunk] | AsyncIterator[StreamChunk]) -> GatewayStream:
        """The `GatewayStream` over the translated chunks."""
        route = self.route
        return GatewayStream(str(self.config["run_id"]), route.model, route.provider, chunks, self.dropped)


def _refusal(report: DroppedContentReport, route: Route) -> PolicyRule:
    reason = (
        f"Feature {route.feature!r} routes to the text-only model {route.provider}:{route.model} and "
        f"strict_text_only=True, but the call carries {report.describe()}. Send text only, or drop "
        "strict_text_only=True to have the gateway strip the rest."
    )

    def strict_text_only(context: PolicyContext) -> PolicyDecision:
        return PolicyDecision("strict_text_only", False, reason)

    return strict_text_only


@functools.cache
def _bind_request() -> Callable[..., tuple[Runnable[LanguageModelInput, AIMessage], tuple[str, ...]]]:
    # Imported on first use (``ai_utils.llm`` is not imported with the gateway), then kept: every call binds.
    from ai_utils.llm._request import bind_request

    return bind_request


def prepare_call(route: Route, messages: Any, request: Request, *, model: BaseChatModel) -> PreparedCall:
    """Read the messages, strip or refuse non-text content for a text-only route, bind tools and options.

    Args:
        route: the feature's route.
        messages: the caller's messages.
        request: the call's options.
        model: the route's chat model.

    Returns:
        The `PreparedCall`.

    Raises:
        UserError: unreadable messages or a malformed option.
        GatewayError: a text-only route and nothing but non-text content to send.
    """
    started = time.perf_counter()
    # A string (text only) goes to the model as it is: LangChain makes the one human message from it, as for a
    # plain ``model.invoke("...")``, instead of validating a list of ours again.
    listed: LanguageModelInput = messages if isinstance(messages, str) else as_messages(messages)
    tools = list(request.tools or ())
    report = NOTHING_DROPPED
    refusal: PolicyRule | None = None
    if route.is_text_only and (report := report_dropped_content(listed, tools)) is not NOTHING_DROPPED:
        if request.strict_text_only:
            refusal, report = _refusal(report, route), NOTHING_DROPPED
        else:
            listed, tools = strip_non_text(as_messages(listed)), []
            if not listed:
                raise GatewayError(
                    f"Feature {route.feature!r} routes to the text-only model {route.provider}:{route.model}, and "
                    f"without its {report.describe()} the call has no text left to send. Send a text message."
                )
    runnable, dropped_options = _bind_request()(model, tools=tools, options=request.options())
    if dropped_options:
        report = report.with_options(dropped_options)
    if report is not NOTHING_DROPPED:
        if request.on_dropped_content is not None:
            request.on_dropped_content(report)
        else:
            log_dropped_content(report, feature=route.feature, provider=route.provider, model=route.model)
    # A UUIDv7 run id, as LangChain gives a run it names itself (and cheaper to make than a uuid4).
    return PreparedCall(route, runnable, listed, report, refusal, started, RunnableConfig(run_id=uuid7()))
