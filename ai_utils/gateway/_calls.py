"""A LangChain model call as the audit sees it: message views, offered tools, the invoked model, the result."""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from ai_utils._images import sniff

__all__ = ["invoked_model", "message_view", "check_images", "non_finite_in", "read_result", "tool_names"]


def invoked_model(invocation_params: Any) -> str | None:
    """The model a call was sent to, from its invocation params (e.g. the fallback that answered)."""
    if not isinstance(invocation_params, Mapping):
        return None
    model = invocation_params.get("model") or invocation_params.get("model_name")
    return model if isinstance(model, str) and model else None


def tool_names(invocation_params: Any) -> list[str]:
    """Names of the tools a call offers, from its invocation params."""
    if not isinstance(invocation_params, Mapping):
        return []
    names: list[str] = []
    for tool in invocation_params.get("tools") or ():
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else None
            name = name or tool.get("name") or tool.get("type")
            if name:
                names.append(str(name))
    return names


def message_view(message: BaseMessage) -> dict[str, Any]:
    """A message as the audit hashes and summarizes it: role, content and tool calls."""
    view: dict[str, Any] = {"role": message.type, "content": message.content}
    if isinstance(message, AIMessage) and message.tool_calls:
        view["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
    return view


def read_result(response: LLMResult, request_id: str) -> tuple[str, list[str], dict[str, Any] | None]:
    """The answer text, the tools the model called and the token usage; tags each message with ``request_id``."""
    texts: list[str] = []
    tools_used: list[str] = []
    usage: dict[str, Any] | None = None
    for batch in response.generations:
        for generation in batch:
            if isinstance(generation, ChatGeneration):
                message = generation.message
                content = message.content  # `.text` would walk content blocks even for plain text
                texts.append(content if isinstance(content, str) else message.text)
                message.response_metadata.setdefault("gateway_request_id", request_id)
                if isinstance(message, AIMessage):
                    tools_used.extend(call["name"] for call in message.tool_calls)
                    if message.usage_metadata:
                        usage = dict(message.usage_metadata)
            else:
                texts.append(generation.text)
    if usage is None and response.llm_output:
        token_usage = response.llm_output.get("token_usage")
        if isinstance(token_usage, Mapping):
            usage = dict(token_usage)
    return "".join(texts), tools_used, usage


# Deeper than any tool argument or usage record a provider sends; past it a value counts as unreadable (bounded walk).
_MAX_DEPTH = 64


def _non_finite(value: Any, depth: int = 0) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if depth > _MAX_DEPTH:
        return isinstance(value, (Mapping, list, tuple))
    if isinstance(value, Mapping):
        return any(_non_finite(item, depth + 1) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_non_finite(item, depth + 1) for item in value)
    return False


def non_finite_in(response: LLMResult, usage: Mapping[str, Any] | None) -> str | None:
    """Where a reply carries a non-finite number: ``"its token usage"``, ``"the arguments of tool call 'x'"``, or None.

    ``NaN``/``Infinity`` are not JSON, so only a broken or hostile provider sends them; Python's JSON parsers (the
    SDKs', LangChain's for tool arguments) accept them.
    """
    if usage is not None and _non_finite(usage):
        return "its token usage"
    for batch in response.generations:
        for generation in batch:
            message = generation.message if isinstance(generation, ChatGeneration) else None
            if isinstance(message, AIMessage):
                for call in message.tool_calls:
                    if _non_finite(call["args"]):
                        return f"the arguments of tool call {call['name']!r}"
    return None


def _checked_data_url(url: str) -> str | None:
    """``url`` typed by its bytes (relabelled if the provider's label differs), or None when it holds no image."""
    header, comma, payload = url.partition(",")
    if not comma or not header.lower().endswith(";base64"):
        return None
    try:
        mime = sniff(base64.b64decode(payload, validate=True))
    except (binascii.Error, ValueError):
        return None
    if mime is None:
        return None
    return url if header[len("data:") :].lower().split(";", 1)[0] == mime else f"data:{mime};base64,{payload}"


def _checked_base64(data: Any) -> str | None:
    """The image type of base64 ``data`` by its bytes, or None when it is not a PNG/JPEG/GIF/WebP image."""
    if not isinstance(data, str):
        return None
    try:
        return sniff(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def _check_part(part: dict[str, Any]) -> bool:
    """Type one returned image part by its bytes, in place; False when it carries something else."""
    kind = part.get("type")
    if kind == "image_url":
        holder = part.get("image_url")
        url = holder.get("url") if isinstance(holder, dict) else holder
        if not isinstance(url, str) or url[:5].lower() != "data:":
            return True  # a link, not bytes the provider sent
        checked = _checked_data_url(url)
        if checked is None:
            return False
        if isinstance(holder, dict):
            holder["url"] = checked
        else:
            part["image_url"] = checked
        return True
    if kind == "image":
        source = part.get("source")
        if isinstance(source, dict) and source.get("type") == "base64":  # Anthropic's shape
            mime = _checked_base64(source.get("data"))
            if mime is not None:
                source["media_type"] = mime
            return mime is not None
        key = "base64" if "base64" in part else "data" if "data" in part else None
        if key is None:
            return True  # by URL or file id
        mime = _checked_base64(part[key])
        if mime is not None:
            part["mime_type"] = mime
        return mime is not None
    return True


def check_images(response: LLMResult) -> str | None:
    """Type every image a reply carries by its bytes (its label corrected in place), like `vision`'s inputs.

    Returns:
        None, or what is wrong: a part labelled as an image whose bytes are not a PNG/JPEG/GIF/WebP image (an HTML
        page labelled ``image/png``) or not valid base64.
    """
    for batch in response.generations:
        for generation in batch:
            message = generation.message if isinstance(generation, ChatGeneration) else None
            content = message.content if message is not None else None
            if not isinstance(content, list):
                continue  # plain text: the common reply, nothing to look at
            for part in content:
                if isinstance(part, dict) and not _check_part(part):
                    return f"an image part ({str(part.get('type'))[:20]})"
    return None
