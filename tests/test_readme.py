"""Every Python snippet in README.md runs as written (offline: keys are dummies, servers are local)."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest
from _services import Aimock

README = Path(__file__).parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_the_two_setup_commands() -> None:
    text = README.read_text()
    assert "./scripts/demo" in text and "./scripts/test" in text
    assert (README.parent / "scripts" / "demo").stat().st_mode & stat.S_IXUSR


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_snippet_runs(index: int, aimock: Aimock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # get_llm() examples need keys and a reachable provider: dummies, and the local fake server.
    for name in (
        "OPENROUTER_API_KEY", "OPENAI_API_KEY", "CHATGROQ_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY",
        "DEEPSEEK_API_KEY",
    ):  # fmt: skip
        monkeypatch.setenv(name, "sk-test-not-a-real-key")
    monkeypatch.setenv("OPENROUTER_BASE_URL", aimock.openrouter_base_url)
    claude = tmp_path / "claude"
    claude.write_text("#!/bin/sh\nexit 0\n")
    claude.chmod(0o755)
    monkeypatch.setenv("AI_UTILS_CLAUDE_CLI", str(claude))
    code = BLOCKS[index]
    exec(compile(code, f"README.md python block {index + 1}", "exec"), {"__name__": f"readme_{index}"})
