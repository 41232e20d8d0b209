"""No warning or log line quotes a ``context`` value (a typed ``context_schema`` and tools reading the runtime).

A tool with ``runtime: ToolRuntime`` (bare, as LangChain documents it, or typed with another context type, as
deepagents' file tools are) makes pydantic warn on every call with a real context, quoting it: the API token on
stderr, in logs, or in the error message under ``-W error``.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from ai_utils import Agent, DeepAgent
from ai_utils.testing import FakeChatModel, FunctionChatModel

PROC = Path(__file__).with_name("_typed_context_proc.py")
SENTINEL = "sk-SENTINEL-5b1e93d2"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error::UserWarning", str(PROC), SENTINEL, *args],
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_the_attack_plain_create_agent_quotes_the_context_in_a_pydantic_warning() -> None:
    done = run("raw")

    assert done.returncode != 0
    assert "PydanticSerializationUnexpectedValue" in done.stderr
    assert SENTINEL in done.stderr


def test_typed_context_runs_under_w_error_quote_the_context_nowhere() -> None:
    done = run()

    assert done.returncode == 0, done.stderr[-3000:]
    assert "all runs done" in done.stdout
    assert "DEBUG" in done.stderr  # the logs were on
    assert SENTINEL not in done.stdout + done.stderr


class Secrets(BaseModel):
    api_token: str


@tool
def whoami(query: str, runtime: ToolRuntime) -> str:
    """Who is asking."""
    return f"token of length {len(runtime.context.api_token)}"


@pytest.mark.parametrize("kind", ["agent", "deep"])
def test_a_tool_reading_the_runtime_raises_no_warning_and_logs_no_context(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    calls = [{"name": "whoami", "args": {"query": "x"}}]
    if kind == "deep":
        calls.append({"name": "ls", "args": {"path": "/"}})  # deepagents' file tool: ToolRuntime[None, ...]
    model = FakeChatModel([{"tool_calls": calls}, "done"])
    agent: Agent | DeepAgent = (
        DeepAgent(llm=model, tools=[whoami], context_schema=Secrets, checkpointer=False)
        if kind == "deep"
        else Agent(llm=model, tools=[whoami], context_schema=Secrets)
    )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert agent.invoke("hi", context=Secrets(api_token=SENTINEL)) == "done"

    assert [str(w.message) for w in caught] == []
    assert SENTINEL not in caplog.text
    tool_result = next(m for m in model.calls[-1] if getattr(m, "name", None) == "whoami")
    assert tool_result.text == f"token of length {len(SENTINEL)}"  # the tool did read the context


@pytest.mark.parametrize("subagent", ["general-purpose", "ops"])
def test_a_subagents_tool_reading_the_runtime_sees_the_context_and_warns_nowhere(
    subagent: str, caplog: pytest.LogCaptureFixture
) -> None:
    sub_results: list[ToolMessage] = []

    def team(messages: list[BaseMessage], tools: list[dict[str, object]]) -> object:
        main = isinstance(messages[0], SystemMessage) and messages[0].text.startswith("MAIN")
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if main:
            task = {"description": "who am I", "subagent_type": subagent}
            return f"Main: {results[-1].text}" if results else {"tool_calls": [{"name": "task", "args": task}]}
        if results:
            sub_results[:] = results
            return "sub done"
        return {"tool_calls": [{"name": "whoami", "args": {"query": "x"}}, {"name": "ls", "args": {"path": "/"}}]}

    caplog.set_level(logging.DEBUG)
    ops = {"name": "ops", "description": "Answers who is asking.", "system_prompt": "OPS.", "tools": [whoami]}
    agent = DeepAgent(
        llm=FunctionChatModel(team),
        prompt="MAIN: delegate.",
        tools=[whoami],
        subagents=[ops],  # type: ignore[list-item]
        context_schema=Secrets,
        checkpointer=False,
    )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert agent.invoke("hi", context=Secrets(api_token=SENTINEL)) == "Main: sub done"

    assert [str(w.message) for w in caught] == []
    assert SENTINEL not in caplog.text
    assert [(m.name, m.status) for m in sub_results] == [("whoami", "success"), ("ls", "success")]
    assert sub_results[0].text == f"token of length {len(SENTINEL)}"
