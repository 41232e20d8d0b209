"""Every notebook runs offline in a Jupyter kernel of the project venv, and is committed stripped."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import ai_utils

NOTEBOOKS = Path(__file__).parents[1] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))

# Appended to the in-memory copy: which interpreter and which ai_utils ran the notebook, and that no key leaked in.
PROBE = """
import os, sys, ai_utils
print("PROBE", sys.executable, ai_utils.__file__, sorted(k for k in os.environ if k.endswith("_API_KEY")))
"""

EXPECTED = {
    "quickstart.ipynb": [
        "Hello from a scripted model, streamed word by word.",
        "Brief(title='NoteAI', audience='teams', benefits=['fast', 'shared'])",
        '[tool:start] get_weather {"city": "Berlin"}\n[tool:end] get_weather → Berlin: sunny\nSunny in Berlin.',
        "[('start', 'get_weather'), ('end', 'get_weather')]\nSunny in Paris.",
        "category: billing",
        "Embedding documents ██████████████████████████████ 1000/1000 100%",
        "Schicht 7 beginnt um 13 Uhr.",
    ],
    "hitl_memory.ipynb": [
        "interrupt - Send this mail?",
        "Mail sent to Bob.",
        "[interrupt] Send this mail?\n  tool: send_mail",
        "rejected the tool call for `send_mail` with reason: Not to everyone.\nOK, I did not send it.",
        "Hallo Max!\nDu heisst Max.\nDas weiss ich nicht.",
        "7 messages in the thread's state",
        "16 messages in the raw history",
    ],
}


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _text(cell: nbformat.NotebookNode) -> str:
    """The cell's plain-text output, colours stripped."""
    parts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            parts.append(output["text"])
        elif output["output_type"] in ("execute_result", "display_data"):
            parts.append(output["data"].get("text/plain", ""))
    return _ANSI.sub("", "".join(parts))


def test_there_is_a_quickstart_and_a_hitl_memory_notebook() -> None:
    assert {path.name for path in PATHS} >= set(EXPECTED)


@pytest.mark.parametrize("path", PATHS, ids=[path.name for path in PATHS])
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)


@pytest.mark.parametrize("path", PATHS, ids=[path.name for path in PATHS])
def test_notebook_runs_offline_in_the_project_kernel(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [name for name in os.environ if name.endswith("_API_KEY")]:
        monkeypatch.delenv(name)
    # Jupyter and IPython write runtime/config files: keep them out of the home directory.
    for name in ("JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR", "IPYTHONDIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(PROBE))
    client = NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )

    client.execute()  # raises CellExecutionError on the first failing cell

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert not [output for cell in code for output in cell.outputs if output["output_type"] == "error"]
    outputs = "".join(_text(cell) for cell in code)
    for expected in EXPECTED.get(path.name, []):
        assert expected in outputs
    # A sync `invoke`/`stream` in a cell is how a notebook works: no "running event loop" warning for it.
    assert "Warning" not in "".join(
        output["text"] for cell in code for output in cell.outputs if output.get("name") == "stderr"
    )
    assert _text(code[-1]).split() == ["PROBE", sys.executable, ai_utils.__file__, "[]"]
