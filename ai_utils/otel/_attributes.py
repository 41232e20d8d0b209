"""GenAI semantic-convention attribute names and the pure functions that fill them from callback arguments.

The names are spelled here, not imported from ``opentelemetry.semconv._incubating`` (a private module that moves
between releases; the GenAI conventions are still incubating). Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ai_utils._json import fast_json

__all__ = [
    "AGENT_NAME",
    "CONVERSATION_ID",
    "ERROR_TYPE",
    "GATEWAY_REQUEST_ID",
    "INPUT_MESSAGES",
    "OPERATION_NAME",
    "OUTPUT_MESSAGES",
    "PROVIDER_NAME",
    "REQUEST_MODEL",
    "RESPONSE_FINISH_REASONS",
    "RESPONSE_ID",
    "RESPONSE_MODEL",
    "TOOL_CALL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_CALL_RESULT",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "TOOL_TYPE",
    "USAGE_INPUT_TOKENS",
    "USAGE_OUTPUT_TOKENS",
    "agent_attributes",
    "answer_attributes",
    "agent_identity",
    "chat_attributes",
    "chat_result",
    "content_json",
    "conversation_id",
    "messages_json",
    "tool_attributes",
]

OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
ERROR_TYPE = "error.type"
# Content: only with capture_content (the handler's one gate).
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
# Not a semantic convention: the id our gateway gives a model call (its audit rows and events carry it too).
GATEWAY_REQUEST_ID = "ai_utils.gateway.request_id"

# The ``ls_integration`` metadata LangChain's ``create_agent`` and deepagents put on their graphs' runs.
_AGENT_INTEGRATIONS = frozenset({"langchain_create_agent", "deepagents"})


def conversation_id(metadata: Mapping[str, Any] | None) -> str | None:
    """The run's thread (a durable session's thread is its session id), from the callback metadata."""
    value = (metadata or {}).get("thread_id")
    return None if value is None else str(value)


def agent_identity(metadata: Mapping[str, Any] | None) -> tuple[bool, str | None]:
    """Whether a chain run belongs to an agent graph, and which agent (``lc_agent_name``, ``None`` unnamed)."""
    metadata = metadata or {}
    return metadata.get("ls_integration") in _AGENT_INTEGRATIONS, metadata.get("lc_agent_name")


def agent_attributes(name: str, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``invoke_agent`` span's attributes."""
    attributes: dict[str, Any] = {OPERATION_NAME: "invoke_agent", AGENT_NAME: name}
    conversation = conversation_id(metadata)
    if conversation is not None:
        attributes[CONVERSATION_ID] = conversation
    return attributes


def _model_name(metadata: Mapping[str, Any], params: Mapping[str, Any]) -> str | None:
    for value in (metadata.get("ls_model_name"), params.get("model"), params.get("model_name")):
        if isinstance(value, str) and value:
            return value
    return None


def chat_attributes(
    metadata: Mapping[str, Any] | None, invocation_params: Mapping[str, Any] | None
) -> tuple[str | None, dict[str, Any]]:
    """The requested model and the ``chat`` span's attributes at the start of a model call."""
    metadata = metadata or {}
    params = invocation_params or {}
    model = _model_name(metadata, params)
    attributes: dict[str, Any] = {OPERATION_NAME: "chat"}
    provider = metadata.get("ls_provider")
    if isinstance(provider, str) and provider:
        attributes[PROVIDER_NAME] = provider
    if model is not None:
        attributes[REQUEST_MODEL] = model
    for key, name in (("ls_temperature", REQUEST_TEMPERATURE), ("ls_max_tokens", REQUEST_MAX_TOKENS)):
        value = metadata.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attributes[name] = value
    conversation = conversation_id(metadata)
    if conversation is not None:
        attributes[CONVERSATION_ID] = conversation
    return model, attributes


def chat_result(response: Any) -> tuple[dict[str, Any], list[Any]]:
    """The ``chat`` span's attributes from an ``LLMResult`` (model, id, finish reasons, usage), and its messages."""
    messages = [
        message
        for generations in getattr(response, "generations", None) or ()
        for generation in generations
        if (message := getattr(generation, "message", None)) is not None
    ]
    attributes, has_usage = _answer_attributes(messages)
    llm_output = getattr(response, "llm_output", None) or {}
    if RESPONSE_MODEL not in attributes and isinstance(llm_output.get("model_name"), str):
        attributes[RESPONSE_MODEL] = llm_output["model_name"]
    if not has_usage and isinstance(llm_output.get("token_usage"), Mapping):
        usage = llm_output["token_usage"]
        if "prompt_tokens" in usage or "completion_tokens" in usage:
            attributes[USAGE_INPUT_TOKENS] = int(usage.get("prompt_tokens") or 0)
            attributes[USAGE_OUTPUT_TOKENS] = int(usage.get("completion_tokens") or 0)
    return attributes, messages


def answer_attributes(messages: Sequence[Any]) -> dict[str, Any]:
    """The ``chat`` span's attributes from the model's answer messages (what a model-call hook gets back)."""
    return _answer_attributes(messages)[0]


def _answer_attributes(messages: Sequence[Any]) -> tuple[dict[str, Any], bool]:
    attributes: dict[str, Any] = {}
    reasons: list[str] = []
    input_tokens = output_tokens = 0
    has_usage = False
    for message in messages:
        meta = getattr(message, "response_metadata", None) or {}
        model = meta.get("model_name") or meta.get("model")
        if isinstance(model, str) and model:
            attributes[RESPONSE_MODEL] = model
        reason = meta.get("finish_reason") or meta.get("stop_reason")
        if isinstance(reason, str) and reason:
            reasons.append(reason)
        request_id = meta.get("gateway_request_id")
        if isinstance(request_id, str):
            attributes[GATEWAY_REQUEST_ID] = request_id
        if getattr(message, "id", None):
            attributes[RESPONSE_ID] = str(message.id)
        usage = getattr(message, "usage_metadata", None)
        if usage:
            has_usage = True
            input_tokens += int(usage.get("input_tokens") or 0)
            output_tokens += int(usage.get("output_tokens") or 0)
    if has_usage:
        attributes[USAGE_INPUT_TOKENS] = input_tokens
        attributes[USAGE_OUTPUT_TOKENS] = output_tokens
    if reasons:
        attributes[RESPONSE_FINISH_REASONS] = reasons
    return attributes, has_usage


def tool_attributes(
    serialized: Mapping[str, Any] | None, name: str | None, tool_call_id: str | None, metadata: Mapping[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """The tool's name and the ``execute_tool`` span's attributes."""
    serialized = serialized or {}
    tool = name or str(serialized.get("name") or "tool")
    attributes: dict[str, Any] = {OPERATION_NAME: "execute_tool", TOOL_NAME: tool, TOOL_TYPE: "function"}
    description = serialized.get("description")
    if isinstance(description, str) and description:
        attributes[TOOL_DESCRIPTION] = description
    if tool_call_id:
        attributes[TOOL_CALL_ID] = tool_call_id
    conversation = conversation_id(metadata)
    if conversation is not None:
        attributes[CONVERSATION_ID] = conversation
    return tool, attributes


def _part(message: Any) -> dict[str, Any]:
    role = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}.get(
        str(getattr(message, "type", "")), str(getattr(message, "type", "user"))
    )
    parts: list[dict[str, Any]] = []
    text = getattr(message, "text", None)
    if text:
        parts.append({"type": "text", "content": str(text)})
    for call in getattr(message, "tool_calls", None) or ():
        parts.append(
            {"type": "tool_call", "id": call.get("id"), "name": call.get("name"), "arguments": call.get("args")}
        )
    if role == "tool":
        parts = [{"type": "tool_call_response", "id": getattr(message, "tool_call_id", None), "response": text}]
    return {"role": role, "parts": parts}


_dumps = fast_json(lambda value: json.dumps(value, ensure_ascii=False, default=str), default=str)


def content_json(value: Any) -> str:
    """A content attribute's value as JSON text (what is not JSON becomes its ``str``)."""
    return value if isinstance(value, str) else _dumps(value)


def messages_json(messages: Sequence[Any]) -> str:
    """Messages in the GenAI conventions' JSON shape (``[{"role", "parts": [...]}]``), for content attributes."""
    return _dumps([_part(m) for m in messages])
