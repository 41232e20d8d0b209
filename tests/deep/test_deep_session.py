"""session(..., is_deep_agent=True) driving a real DeepAgent in a real process: approve, reject with reason, edit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    from langchain_core.messages import ToolMessage

    from ai_utils import session
    from ai_utils.deep import DeepAgent, create_workspace_backend, workspace_permissions
    from ai_utils.testing import FakeChatModel

    def write(name, text):
        return {"tool_calls": [{"name": "write_file", "args": {"file_path": f"/workspace/{name}", "content": text}}]}

    llm = FakeChatModel(
        [write("a.txt", "A"), "Geschrieben.", write("b.txt", "B"), "Dann nicht.", write("c.txt", "C"), "Geändert."]
    )
    agent = DeepAgent(
        llm=llm,
        backend=create_workspace_backend(Path(sys.argv[1]), route="/workspace/"),
        permissions=workspace_permissions("/workspace/"),
        interrupt_on={"write_file": {"decisions": ["approve", "edit", "reject"], "question": "Datei schreiben?"}},
    )
    session(agent, id="dev", is_deep_agent=True)
    for messages in llm.calls:
        if isinstance(messages[-1], ToolMessage):
            print(f"<<model saw: {messages[-1].text}>>")
    print("BYE")
    """
)


def test_session_runs_a_deep_agent_with_approve_reject_and_edit_from_stdin(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    edit = '{"file_path": "/workspace/c.txt", "content": "C bearbeitet"}'
    stdin = (
        f"schreib die datei\nja\nschreib noch eine\nvielleicht\nreject: nicht die\nund die dritte\nedit: {edit}\nexit\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(workspace)],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        env={"TERM": "dumb", "PYTHONIOENCODING": "utf-8"},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    out = done.stdout

    assert out.count("[interrupt] Datei schreiben?") == 3
    assert "decisions: approve, edit, reject" in out
    assert '[tool:start] write_file {"file_path": "/workspace/a.txt", "content": "A"}' in out
    # "ja" approves: the file is on disk and the model is told.
    assert "[tool:end] write_file → Updated file /workspace/a.txt" in out
    assert (workspace / "a.txt").read_text() == "A"
    # A line that is no decision keeps the interrupt waiting; "reject: <reason>" writes nothing, the model reads why.
    assert "Answer with approve / ja / ok, reject, reject: <reason>, edit: {json args} or respond: <text>.\n" in out
    assert not (workspace / "b.txt").exists()
    assert any(line.startswith("<<model saw: ") and "nicht die" in line for line in out.splitlines())
    # "edit: {json}" writes the edited call instead of the proposed one.
    assert (workspace / "c.txt").read_text() == "C bearbeitet"
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt", "c.txt"]

    assert out.index("Geschrieben.") < out.index("Dann nicht.") < out.index("Geändert.")
    assert out.rstrip().endswith("BYE")
