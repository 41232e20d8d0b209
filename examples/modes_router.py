"""Modes: a health agent whose tools change with what the user says (seed: agent-core KeywordModeRouter).

Three turns of one conversation: a greeting (general mode), a symptom check (assessment mode: medication
lookup allowed) and a crisis message (safety mode: no tools at all). The stream starts each turn with the
mode chunk; the scripted model then tries a tool, and a tool outside the mode is refused. Offline it runs a
scripted model; with OPENROUTER_API_KEY set the same agent runs on the real default model.
Run: `.venv/bin/python examples/modes_router.py`
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from ai_utils import Agent, KeywordModeRouter, MemorySaver, ModeDefinition, get_llm
from ai_utils.client import is_mode_event, is_tool_event
from ai_utils.testing import FunctionChatModel

router = KeywordModeRouter(
    default_mode=ModeDefinition(
        mode="general", allowed_tools=["greet_user", "log_concern"], active_skills=["base-personality"]
    ),
    rules=[
        {
            "keywords": ["suicide", "self-harm", "kill myself"],
            "mode": "safety",
            "definition": {"allowed_tools": [], "active_skills": ["crisis-response"], "max_tool_iterations": 1},
        },
        {
            "keywords": ["diagnose", "assessment", "evaluate"],
            "mode": "assessment",
            "definition": {"allowed_tools": ["log_concern", "lookup_medication"], "max_tool_iterations": 8},
            "exclude": [r"what is"],
        },
    ],
)


def greet_user(name: str) -> str:
    """Greet a user by name."""
    return f"Hello, {name}!"


def log_concern(concern: str) -> str:
    """Log a health concern for the care team."""
    return f"logged: {concern}"


def lookup_medication(name: str) -> str:
    """Look up how to take a medication."""
    return f"{name}: take with food, at most 3 times a day"


def scripted(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    """Offline stand-in: tries `greet_user` once per turn (refused outside general), then answers."""
    offered = [t["function"]["name"] for t in tools]
    turn = messages[[i for i, m in enumerate(messages) if m.type == "human"][-1] :]
    results = [m for m in turn if isinstance(m, ToolMessage)]
    if not results:
        return {"tool_calls": [{"name": "greet_user", "args": {"name": "Alex"}}]}
    if len(results) == 1 and "lookup_medication" in offered:
        return {"tool_calls": [{"name": "lookup_medication", "args": {"name": "ibuprofen"}}]}
    if not offered:
        return "I'm really sorry you feel this way. Please call your local emergency number now."
    return f"Done ({results[-1].text})."


def main() -> None:
    real = bool(os.environ.get("OPENROUTER_API_KEY"))
    print("(real model via get_llm())" if real else "(offline: scripted model; set OPENROUTER_API_KEY)")
    llm = get_llm() if real else FunctionChatModel(scripted)
    agent = Agent(
        llm=llm,
        prompt="You are a careful health assistant.",
        tools=[greet_user, log_concern, lookup_medication],
        modes=router,
        checkpointer=MemorySaver(),
    )
    for message in ["Hi, I'm Alex!", "Can you evaluate my headache? Should I take ibuprofen?", "I want to kill myself"]:
        print(f"\nuser: {message}")
        text = ""
        for chunk in agent.stream(message, thread_id="alex", show_tool_calls=True):
            if is_mode_event(chunk):
                print(f"  [mode] {chunk['mode']}  tools={chunk['tools']}")
            elif is_tool_event(chunk) and chunk["phase"] == "end":
                print(f"  [tool:{chunk.get('status')}] {chunk['tool_name']} → {chunk.get('output')}")
            elif isinstance(chunk, str):
                text += chunk
        print(f"  assistant: {text}")


if __name__ == "__main__":
    main()
