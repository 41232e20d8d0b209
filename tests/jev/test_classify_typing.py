"""mypy --strict (no plugin) infers the typed answers, and rejects misspelt labels and question names."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "typing" / "check_classify.py"
BAD = ROOT / "tests" / "typing" / "check_classify_errors.py"
LLM = ROOT / "tests" / "typing" / "check_classify_llm.py"
# Under pytest-xdist both mypy tests run on one worker (tests/agents/test_agent_typing.py says why).
pytestmark = pytest.mark.xdist_group("mypy")


@pytest.fixture(scope="module")
def mypy_output() -> str:
    """One mypy run over both files (the analysis of ai_utils and LangChain is the slow part)."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "--no-color-output",
            str(GOOD),
            str(BAD),
            str(LLM),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode in (0, 1), run.stdout + run.stderr
    return run.stdout


def errors_in(output: str, path: Path) -> dict[int, str]:
    pattern = rf"{re.escape(path.name)}:(\d+): error: (.*)"
    return {int(match[1]): match[2] for match in re.finditer(pattern, output)}


def test_mypy_infers_typed_answers_and_label_literals(mypy_output: str) -> None:
    assert errors_in(mypy_output, GOOD) == {}
    assert errors_in(mypy_output, LLM) == {}  # classify(..., llm=...) keeps the typed form
    assert "checked 3 source files" in mypy_output


def test_mypy_rejects_misspelt_labels_and_question_names(mypy_output: str) -> None:
    errors = errors_in(mypy_output, BAD)

    assert sorted(errors) == [13, 19, 20, 21], mypy_output
    assert errors[13].startswith("Dict entry 0 has incompatible type \"Literal['biling']\"")
    assert errors[19].startswith('"Triage" has no attribute "categroy"; maybe "category"?')
    assert errors[20].startswith("Invalid index type \"Literal['legal']\"")
    assert errors[21].startswith("Non-overlapping equality check")
