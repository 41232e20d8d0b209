"""session() driving a real Agent in a real process: a message, an approval, a rejection with reason."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    from langgraph.checkpoint.memory import InMemorySaver
    from ai_utils import Agent, session
    from ai_utils.testing import FakeChatModel

    def delete_file(path: str) -> str:
        \"\"\"Delete a file.\"\"\"
        print(f"<<deleted {path}>>")
        return "deleted"

    call = lambda p: {"tool_calls": [{"name": "delete_file", "args": {"path": p}}]}
    agent = Agent(
        llm=FakeChatModel([call("/tmp/a"), "Gelöscht.", call("/tmp/b"), "Dann nicht."]),
        tools=[delete_file],
        checkpointer=InMemorySaver(),
        interrupt_on={"delete_file": {"decisions": ["approve", "reject"], "question": "Datei löschen?"}},
    )
    session(agent, id="dev", is_deep_agent=True)
    print("BYE")
    """
)


def test_session_runs_an_agent_with_approvals_from_stdin() -> None:
    stdin = "lösche a\nja\nlösche b\nreject: nicht b\nexit\n"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], input=stdin, capture_output=True, text=True, timeout=120, env={"TERM": "dumb"}
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("[interrupt] Datei löschen?") == 2
    assert "<<deleted /tmp/a>>" in out and "<<deleted /tmp/b>>" not in out
    assert "Gelöscht." in out and "Dann nicht." in out
    assert "[tool:end] delete_file → deleted" in out and "nicht b" in out
    assert out.rstrip().endswith("BYE")
