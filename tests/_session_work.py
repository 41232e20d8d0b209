"""A blocking durable tool and the model that calls it: a session turn that stays running until released."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import tool

from ai_utils import durable_tool
from ai_utils.testing import FunctionChatModel


def blocking_tool(started: threading.Event, release: threading.Event) -> Any:
    """A durable ``work`` tool (not idempotent) that sets ``started`` and runs until ``release`` is set."""

    @tool
    async def work(task: str) -> str:
        """Do some work."""
        started.set()
        while not release.is_set():
            await asyncio.sleep(0.02)
        return f"{task} done"

    return durable_tool(work, idempotent=False)


def worker_model(seen: list[list[BaseMessage]]) -> FunctionChatModel:
    """Calls ``work`` for a prompt starting with "work", else answers naming the last prompt; records each call."""

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        seen.append(list(messages))
        last = messages[-1]
        if isinstance(last, HumanMessage) and last.text.startswith("work"):
            return {"tool_calls": [{"name": "work", "args": {"task": last.text}}]}
        return f"answer to {[m.text for m in messages if isinstance(m, HumanMessage)][-1]!r}"

    return FunctionChatModel(reply)
