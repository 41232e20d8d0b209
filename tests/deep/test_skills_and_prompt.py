"""DeepAgent as the seed writes it: a list `prompt`, `skills` given as `SKILL.md` paths or folders, none missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import BaseMessage, SystemMessage

from ai_utils import DeepAgent, UserError
from ai_utils.testing import FunctionChatModel


def skill(root: Path, name: str, description: str) -> None:
    folder = root / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    skill(tmp_path, "refactor", "Refactors code safely.")
    skill(tmp_path, "test-writer", "Writes unit tests.")
    return tmp_path


def seen_system(**options: Any) -> str:
    seen: list[str] = []

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        seen.append(messages[0].text if isinstance(messages[0], SystemMessage) else "")
        return "ok"

    DeepAgent(llm=FunctionChatModel(reply), **options).invoke("hi", thread_id="t")
    return seen[0]


def test_a_list_prompt_is_joined_with_blank_lines() -> None:
    system = seen_system(prompt=["Du bist gründlich.", "", "Antworte auf Deutsch."])
    assert system.startswith("Du bist gründlich.\n\nAntworte auf Deutsch.")


def test_a_prompt_list_with_something_else_than_text_is_a_user_error() -> None:
    with pytest.raises(UserError, match=r"str or a list of str.*42"):
        DeepAgent(llm=FunctionChatModel(lambda m, t: "ok"), prompt=["Hallo", 42])  # type: ignore[list-item]


def test_a_skill_md_path_loads_that_skill_only(workspace: Path) -> None:
    backend = FilesystemBackend(root_dir=workspace, virtual_mode=True)
    system = seen_system(backend=backend, skills=["/skills/refactor/SKILL.md"])
    assert "refactor" in system and "Refactors code safely." in system
    assert "test-writer" not in system


def test_a_skill_folder_and_a_folder_of_skills_both_work(workspace: Path) -> None:
    backend = FilesystemBackend(root_dir=workspace, virtual_mode=True)
    one = seen_system(backend=backend, skills=["/skills/test-writer/"])
    assert "Writes unit tests." in one and "Refactors code safely." not in one
    every = seen_system(backend=backend, skills=["/skills/"])
    assert "Writes unit tests." in every and "Refactors code safely." in every
    both = seen_system(backend=backend, skills=["/skills/refactor/SKILL.md", "/skills/test-writer/SKILL.md"])
    assert "Writes unit tests." in both and "Refactors code safely." in both


def test_a_missing_skill_is_a_user_error_when_the_agent_is_built(workspace: Path) -> None:
    backend = FilesystemBackend(root_dir=workspace, virtual_mode=True)
    with pytest.raises(UserError, match=r"no skill found at \['/skills/lint/SKILL.md'\]"):
        DeepAgent(
            llm=FunctionChatModel(lambda m, t: "ok"),
            backend=backend,
            skills=["/skills/refactor/SKILL.md", "/skills/lint/SKILL.md"],
        )
    with pytest.raises(UserError, match="no skill found"):
        DeepAgent(llm=FunctionChatModel(lambda m, t: "ok"), backend=backend, skills=["/nowhere/"])
    with pytest.raises(UserError, match="list of paths"):
        DeepAgent(llm=FunctionChatModel(lambda m, t: "ok"), backend=backend, skills="/skills/")  # type: ignore[arg-type]


def test_with_files_in_the_thread_state_a_missing_skill_fails_the_first_run() -> None:
    agent = DeepAgent(llm=FunctionChatModel(lambda m, t: "ok"), skills=["/skills/refactor/SKILL.md"])
    with pytest.raises(UserError, match="no skill found"):
        agent.invoke("hi", thread_id="t")
