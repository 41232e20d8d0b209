"""mypy --strict (no plugin) types each wrapper's answer by its ``output``/``actions`` and rejects wrong uses."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# mypy over LangChain, LangGraph and deepagents takes minutes on a cold cache and a busy 2-core machine. Under
# pytest-xdist both mypy tests run on one worker, one after the other: the second finds the first's .mypy_cache.
pytestmark = [pytest.mark.timeout(1200), pytest.mark.xdist_group("mypy")]

GOOD = ROOT / "tests" / "typing" / "check_agents.py"
BAD = ROOT / "tests" / "typing" / "check_agents_errors.py"


@pytest.fixture(scope="module")
def mypy_output() -> str:
    """One mypy run over both files (the analysis of ai_utils, LangChain and deepagents is the slow part)."""
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-color-output", str(GOOD), str(BAD)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert run.returncode in (0, 1), run.stdout + run.stderr
    return run.stdout


def errors_in(output: str, path: Path) -> dict[int, list[str]]:
    errors: dict[int, list[str]] = {}
    for match in re.finditer(rf"{re.escape(path.name)}:(\d+): error: (.*)", output):
        errors.setdefault(int(match[1]), []).append(match[2])
    return errors


def test_mypy_types_answers_by_output_and_actions(mypy_output: str) -> None:
    assert errors_in(mypy_output, GOOD) == {}
    assert "checked 2 source files" in mypy_output


def test_mypy_rejects_wrong_answer_types_and_bad_options(mypy_output: str) -> None:
    errors = errors_in(mypy_output, BAD)

    assert sorted(errors) == list(range(19, 30)), mypy_output
    assert errors[19] == [
        'Expression is of type "Weather | InterruptEvent | InterruptBatch", not "str | InterruptEvent | InterruptBatch"'
        "  [assert-type]"
    ]
    assert errors[20] == [
        'Expression is of type "str | InterruptEvent | InterruptBatch", not "Weather | InterruptEvent | InterruptBatch"'
        "  [assert-type]"
    ]
    assert errors[21][0].startswith('Item "str" of "str | InterruptEvent | InterruptBatch" has no attribute "celsius"')
    assert errors[22][0].startswith('No overload variant of "Agent" matches argument types')
    assert errors[23] == [
        'Expression is of type "Weather | InterruptEvent | InterruptBatch", not "Weather"  [assert-type]'
    ]
    assert errors[24] == ['List item 0 has incompatible type "str"; expected "FilesystemPermission"  [list-item]']
    assert errors[25][0].startswith('List item 0 has incompatible type "dict[str, str]"; expected "SubAgent |')
    # The overloads take the shared options as `**options: Unpack[...]`: names and types are still checked.
    assert errors[26][0] == 'Unexpected keyword argument "temprature" for overloaded function "Agent"  [call-overload]'
    # `invoke` is overloaded on `details` (the answer, or the `AgentRun` around it).
    assert errors[27][0] == (
        'Unexpected keyword argument "thred_id" for overloaded function "invoke" of "Agent"; '
        'did you mean "thread_id"?  [call-overload]'
    )
    assert errors[28][0].startswith('Argument "show_tool_calls" to "stream" of ')
    assert errors[28][0].endswith('has incompatible type "str"; expected "bool"  [arg-type]')
    assert errors[29][0].startswith(
        'No overload variant of "Agent" matches argument types "FakeChatModel", "type[Weather]", "str"'
    )
