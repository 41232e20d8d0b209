"""Context builders with the seed's exact texts."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ai_utils import (
    UserError,
    build_history_messages,
    build_mode_tool_instruction,
    build_system_content,
    format_memory_context,
)


def test_build_system_content_drops_none_and_empty_sections_and_joins_with_a_blank_line() -> None:
    assert build_system_content(["Section A", None, "", "   ", "Section B"]) == "Section A\n\nSection B"
    assert build_system_content([None, "  "]) == ""


def test_build_mode_tool_instruction_lists_the_tools_with_the_seed_restriction() -> None:
    text = build_mode_tool_instruction(mode="assessment", tool_names=["log_concern", "lookup_medication"])
    assert text == (
        "MODE: assessment\n"
        "ALLOWED_TOOLS_NOW: log_concern, lookup_medication\n"
        "CRITICAL: You may call ONLY tools listed in ALLOWED_TOOLS_NOW. Do not attempt to call any other tool."
    )


def test_build_mode_tool_instruction_without_tools_asks_for_text_only() -> None:
    assert build_mode_tool_instruction(mode="safety", tool_names=[]) == (
        "MODE: safety\nALLOWED_TOOLS_NOW: (none)\n"
        "CRITICAL: No tools are available in this mode. Respond with text only."
    )


def test_build_history_messages_trims_drops_empty_and_keeps_the_last_n() -> None:
    history = [
        {"role": "user", "content": "  Hello  "},
        {"role": "assistant", "content": "   "},
        {"role": "assistant", "content": "Hi there"},
        *[{"role": "user", "content": f"Message {i}"} for i in range(25)],
    ]
    messages = build_history_messages(history, 20)
    assert len(messages) == 20
    assert messages[0] == HumanMessage("Message 5")
    every = build_history_messages(history)
    assert every[:2] == [HumanMessage("Hello"), AIMessage("Hi there")]
    assert len(every) == 27
    assert build_history_messages(None) == []
    assert build_history_messages(history, 0) == []


def test_build_history_messages_takes_langchain_messages_and_leaves_tool_traffic_out() -> None:
    history = [
        SystemMessage("Be brief."),
        HumanMessage("weather?"),
        AIMessage("", tool_calls=[{"name": "weather", "args": {}, "id": "c1"}]),
        ToolMessage("sunny", tool_call_id="c1"),
        AIMessage("It is sunny."),
    ]
    assert build_history_messages(history) == [
        SystemMessage("Be brief."),
        HumanMessage("weather?"),
        AIMessage("It is sunny."),
    ]


def test_build_history_messages_rejects_unknown_roles_and_bad_windows() -> None:
    with pytest.raises(UserError, match="'robot'"):
        build_history_messages([{"role": "robot", "content": "beep"}])
    with pytest.raises(UserError, match="max_messages"):
        build_history_messages([], -1)


@dataclass
class Memory:
    label: str
    category: str
    certainty_level: str
    status: str
    detail: str | None = None


def test_format_memory_context_has_the_seed_header_and_lines() -> None:
    text = format_memory_context(
        [
            {"label": "ADHD", "category": "diagnosis", "certainty_level": "high", "status": "user_confirmed"},
            Memory("Diabetes", "diagnosis", "high", "inferred", detail="Type 2"),
            {"label": "X", "category": "concern", "certaintyLevel": "low", "status": "inferred"},
        ]
    )
    assert text == (
        "HEALTH MEMORY (untrusted factual snippets — verify with user before acting on these):\n"
        "- [diagnosis] ADHD (high, user_confirmed)\n"
        "- [diagnosis] Diabetes (high, inferred)\n"
        "  Type 2\n"
        "- [concern] X (low, inferred)"
    )
    assert format_memory_context([]) == ""


def test_the_builders_compose_a_system_prompt() -> None:
    system = build_system_content(
        [
            "You are a health agent.",
            build_mode_tool_instruction(mode="general", tool_names=["greet_user"]),
            format_memory_context([]),
            None,
        ]
    )
    assert system.split("\n\n") == [
        "You are a health agent.",
        build_mode_tool_instruction(mode="general", tool_names=["greet_user"]),
    ]
