"""Shared by the routing tests: the seed's router example."""

from __future__ import annotations

import pytest
from _provider_servers.fixtures import anthropic_server as anthropic_server
from _provider_servers.fixtures import deepseek_server as deepseek_server
from _provider_servers.fixtures import gemini_server as gemini_server
from _provider_servers.fixtures import responses_server as responses_server

from ai_utils import KeywordModeRouter, ModeDefinition


def seed_router() -> KeywordModeRouter:
    # The seed's example (agent-core-toolloop "KeywordModeRouter"), in Python spelling.
    return KeywordModeRouter(
        default_mode=ModeDefinition(
            mode="general",
            allowed_tools=["greet_user", "log_concern"],
            active_skills=["base-personality"],
            max_tool_iterations=5,
            retrieval_budget=3,
        ),
        rules=[
            {
                "keywords": ["suicide", "self-harm", "kill myself"],
                "mode": "safety",
                "definition": {
                    "allowed_tools": [],  # no tools in safety mode
                    "active_skills": ["crisis-response"],
                    "max_tool_iterations": 1,
                    "retrieval_budget": 0,
                },
            },
            {
                "keywords": ["diagnose", "assessment", "evaluate"],
                "mode": "assessment",
                "definition": {
                    "allowed_tools": ["log_concern", "lookup_medication"],
                    "active_skills": ["base-personality", "assessment-skill"],
                    "max_tool_iterations": 8,
                    "retrieval_budget": 5,
                },
                "exclude": [r"what is"],  # skip if informational question
            },
        ],
    )


@pytest.fixture
def router() -> KeywordModeRouter:
    """The seed's example router (a fresh one per test)."""
    return seed_router()
