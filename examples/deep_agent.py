"""DeepAgent as a coding agent in a workspace: it writes a file after approval, runs a command, is refused outside.

The agent sees `/workspace/`, which is a temporary folder on disk (`create_local_shell_backend`: the file tools,
and `execute` in a bubblewrap sandbox on this machine where that folder is the only writable host path and only
the toolchain is visible; our command policy refuses escapes first with a clear message; for untrusted code,
which also needs no network and resource limits, use `create_sandbox_backend`). `write_file` waits for a human:
the script approves it through `decision="approve"`. Reading `/etc/passwd` is refused, by the file tool and by
the shell.
Offline a scripted model drives the run; with OPENROUTER_API_KEY set the real model does.
Run: `.venv/bin/python examples/deep_agent.py`
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ai_utils import get_llm, log_chunk
from ai_utils.client import is_interrupt, is_interrupt_batch
from ai_utils.deep import DeepAgent, create_local_shell_backend, workspace_permissions
from ai_utils.testing import FakeChatModel

TASK = (
    "Create /workspace/index.html with a tiny hello-world page. Then list the workspace with the `execute` "
    "tool (`ls -l`) and show the file with `cat index.html`. Finally try to read /etc/passwd, once with "
    "`read_file` and once with `execute` (`cat /etc/passwd`), and tell me in one sentence what happened."
)
PAGE = "<!doctype html>\n<h1>Hello from the DeepAgent</h1>\n"


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def pick_llm() -> Any:
    if os.environ.get("OPENROUTER_API_KEY"):
        print("(real provider via get_llm())")
        return get_llm()
    print("(offline: scripted model; set OPENROUTER_API_KEY for the real one)")
    return FakeChatModel(
        [
            _call("write_file", file_path="/workspace/index.html", content=PAGE),
            _call("execute", command="ls -l && cat index.html"),
            _call("read_file", file_path="/etc/passwd"),
            _call("execute", command="cat /etc/passwd"),
            "index.html is written and listed; /etc/passwd was refused twice, it is outside the workspace.",
        ]
    )


def run(agent: DeepAgent, input: str | None = None, **kwargs: Any) -> Any:
    """Stream one turn (or a resume) with tool events; return the pending interrupt, if any."""
    pending = chunk = None
    for chunk in agent.stream(input, thread_id="site", show_tool_calls=True, **kwargs):
        log_chunk(chunk)
        if is_interrupt(chunk):
            pending = chunk
    if isinstance(chunk, str):
        print()  # end the answer's line
    return pending


def main() -> None:
    llm = pick_llm()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        agent = DeepAgent(
            llm=llm,
            prompt="You are a careful web developer. Work only inside /workspace/.",
            backend=create_local_shell_backend(root, route="/workspace/"),
            permissions=workspace_permissions("/workspace/"),
            interrupt_on={"write_file": {"decisions": ["approve", "edit", "reject"], "question": "Write this file?"}},
        )
        print(f"You: {TASK}\nAssistant:")
        pending = run(agent, TASK)
        for _ in range(5):  # a real model may ask more than once
            if pending is None:
                break
            count = len(pending["items"]) if is_interrupt_batch(pending) else 1
            print(f">>> human: approve ({count} pending)")
            pending = run(agent, decisions=["approve"] * count) if count > 1 else run(agent, decision="approve")
        print(f"\nfiles in the workspace folder: {sorted(p.name for p in root.iterdir())}")
        index = root / "index.html"
        if index.exists():
            print(f"index.html on disk: {index.read_text().strip()!r}")


if __name__ == "__main__":
    main()
