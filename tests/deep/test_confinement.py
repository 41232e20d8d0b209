"""The attacks of issue #14, played by a scripted model through `DeepAgent`, against the local shell.

Each test lays out a workspace next to a secret outside it and lets the model call ``execute`` with
the exact commands a hostile model used against the lexical policy. With OS confinement the secret,
``/etc/passwd``, the planted file and the agent's API key never appear.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from ai_utils import DeepAgent
from ai_utils.deep import create_local_shell_backend, deny_read, workspace_permissions
from ai_utils.deep.permissions import CommandPolicy
from ai_utils.exceptions import UserError
from ai_utils.testing import FakeChatModel

SECRET = "OUTSIDE-SECRET-3f9a"


def _run(backend: Any, calls: list[str | dict[str, Any]], permissions: list[Any] | None = None) -> list[str]:
    """Let a scripted model call ``execute`` once per entry; return the tool results it saw."""
    replies: list[Any] = [
        {"tool_calls": [{"name": "execute", "args": {"command": c} if isinstance(c, str) else c}]} for c in calls
    ]
    model = FakeChatModel([*replies, "done"])
    agent = DeepAgent(
        llm=model,
        backend=backend,
        permissions=workspace_permissions() if permissions is None else permissions,
        checkpointer=False,
    )
    assert agent.invoke("go") == "done"
    results = []
    for index in range(1, len(calls) + 1):
        last = model.calls[index][-1]
        assert isinstance(last, ToolMessage)
        results.append(str(last.content))
    return results


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """``<tmp>/ws`` (the workspace) next to ``<tmp>/outside/secret.txt``; returns the workspace."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "lnk").symlink_to(outside)
    return workspace


def test_globs_through_symlinks_and_dot_dot_globs_reach_nothing_outside(layout: Path) -> None:
    results = _run(
        create_local_shell_backend(layout),
        [
            "cat lnk/secret.tx?",
            "ln -s .? up && cat up/outside/secret.txt",
            "cd .? && cd .? && cd .? && cd .? && cd .? && head -1 etc/passwd",
            "cd .? && echo X > planted.txt",
            "cd .? && ls",
            "echo inside > mine.txt && cat mine.txt",
        ],
    )
    for result in results:
        assert SECRET not in result
        assert "root:x:0:0" not in result
    assert not (layout.parent / "planted.txt").exists()
    assert "outside" not in results[4].split()
    assert "inside" in results[5]
    assert (layout / "mine.txt").read_text() == "inside\n"


def test_host_paths_glued_to_options_are_contained(layout: Path) -> None:
    name = f"confine-{uuid.uuid4().hex}"
    (layout / "f.txt").write_text("data\n")
    results = _run(
        create_local_shell_backend(layout),
        [
            "tar -C/etc -cf - passwd | tar -xOf -",
            f"sort -o/tmp/{name} f.txt",
            f"cp -t/tmp f.txt && mv /tmp/f.txt /tmp/{name}.cp",
            f"head -c 3 /etc/passwd; ls /tmp /root /home; cat {layout.parent}/outside/secret.txt",
        ],
    )
    for result in results:
        assert "root:x:0:0" not in result
        assert SECRET not in result
    assert not Path(f"/tmp/{name}").exists()
    assert not Path(f"/tmp/{name}.cp").exists()


_AGENT_PROCESS = """
import json, sys
from langchain_core.messages import ToolMessage
from ai_utils import DeepAgent
from ai_utils.deep import create_local_shell_backend, workspace_permissions
from ai_utils.testing import FakeChatModel

commands = json.loads(sys.argv[2])
model = FakeChatModel([*({"tool_calls": [{"name": "execute", "args": {"command": c}}]} for c in commands), "done"])
agent = DeepAgent(llm=model, backend=create_local_shell_backend(sys.argv[1]), permissions=workspace_permissions(),
                  checkpointer=False)
agent.invoke("go")
print(json.dumps([str(call[-1].content) for call in model.calls[1:] if isinstance(call[-1], ToolMessage)]))
"""


def test_other_processes_environ_is_out_of_reach(layout: Path) -> None:
    # /proc/PID/environ shows the environment a process started with, so the agent runs in a process
    # of its own that starts with the key, as a server would.
    key = f"sk-or-SENTINEL-{uuid.uuid4().hex}"
    commands = [
        "ps -eo pid= | xargs -IPID xargs -0 -n1 -a/proc/PID/environ echo | grep OPENROUTER_API_KEY",
        "ps -eo pid,args",
        "env",
    ]
    env = {**os.environ, "OPENROUTER_API_KEY": key}
    done = subprocess.run(
        [sys.executable, "-c", _AGENT_PROCESS, str(layout), json.dumps(commands)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    results = json.loads(done.stdout.splitlines()[-1])
    assert len(results) == 3
    assert key not in done.stdout + done.stderr
    # Its own PID namespace: bwrap's init, the shell and ps, nothing of the host.
    pids = [int(line.split()[0]) for line in results[1].splitlines()[1:] if line.strip()[:1].isdigit()]
    assert pids == [1, 2, 3], results[1]


def test_denied_workspace_paths_are_not_readable_by_commands(layout: Path) -> None:
    (layout / "secrets").mkdir()
    (layout / "secrets" / "key.txt").write_text("DENIED-KEY-77")
    (layout / "notes.txt").write_text("public")
    rules = deny_read("/workspace/secrets/**") + workspace_permissions()
    # The rules go only to the agent: it hands them to the shell.
    results = _run(
        create_local_shell_backend(layout),
        [
            "grep -r DENIED .",
            "cd secret? && cat key.txt",
            "cat secret?/*; ls -la secret?",
            "cat notes.txt",
            "echo overwrite > secret?/key.txt",
        ],
        permissions=rules,
    )
    for result in results[:3]:
        assert "DENIED-KEY-77" not in result
    assert "public" in results[3]
    assert (layout / "secrets" / "key.txt").read_text() == "DENIED-KEY-77"


def test_a_denied_file_is_unreadable_and_a_write_denied_folder_read_only(layout: Path) -> None:
    from ai_utils.deep import deny_write

    (layout / ".env").write_text("TOKEN=DENIED-ENV")
    (layout / "locked").mkdir()
    (layout / "locked" / "a.txt").write_text("keep")
    rules = deny_read("/workspace/.env") + deny_write("/workspace/locked/**") + workspace_permissions()
    backend = create_local_shell_backend(layout, permissions=rules)
    results = _run(
        backend, ["cat .e?v; wc -c .e?v", "cat locke?/a.txt; echo x | tee locke?/a.txt; cd locke? && touch new"], rules
    )
    assert "DENIED-ENV" not in results[0]
    assert "cat: .env: Permission denied" in results[0]
    assert "keep" in results[1]
    assert "Read-only file system" in results[1]
    assert (layout / "locked" / "a.txt").read_text() == "keep"
    assert not (layout / "locked" / "new").exists()


def _running(cmdline: bytes) -> bool:
    for proc in Path("/proc").iterdir():
        try:
            if (proc / "cmdline").read_bytes() == cmdline and (proc / "stat").read_text().split()[2] != "Z":
                return True
        except OSError:
            continue
    return False


def test_the_timeout_kills_the_whole_process_tree_and_the_model_cannot_raise_it(layout: Path) -> None:
    backend = create_local_shell_backend(layout, timeout=2)
    started = time.monotonic()
    results = _run(
        backend,
        [
            "setsid sleep 12 &",
            "setsid sleep 12 & sleep 30",
            {"command": "sleep 30", "timeout": 3600},
        ],
    )
    elapsed = time.monotonic() - started
    assert elapsed < 12
    assert "timed out after 2 seconds" in results[1]
    assert "timed out after 2 seconds" in results[2]
    time.sleep(0.3)
    assert not _running(b"sleep\x0012\x00")
    assert not _running(b"sleep\x0030\x00")


def test_a_command_over_64_kib_is_a_tool_error_and_the_run_goes_on(layout: Path) -> None:
    results = _run(create_local_shell_backend(layout), ["echo " + "a" * 200_000, "echo still here"])
    assert "over the limit of 65536 bytes" in results[0]
    assert "still here" in results[1]


def test_the_policy_check_grows_linearly_with_the_command(layout: Path) -> None:
    policy = CommandPolicy()

    def cpu(command: str) -> float:
        started = time.process_time()
        assert policy.check(command, root_dir=layout, route="/workspace/") is None
        return time.process_time() - started

    # The issue measured 2.3 s of CPU for one 400 KB command (quadratic in the token length).
    for piece, small_count in (("a", 50_000), ("a{} ", 2_000), ("/workspace/a", 4_000)):
        small = min(cpu("echo " + "".join(piece.format(i) for i in range(small_count))) for _ in range(2))
        large = min(cpu("echo " + "".join(piece.format(i) for i in range(small_count * 8))) for _ in range(2))
        # 8 times the input: linear is ~8x, quadratic ~64x.
        assert large < max(small, 1e-3) * 24, (piece, small, large)


def test_without_bubblewrap_the_backend_names_what_to_install(layout: Path) -> None:
    with pytest.raises(UserError, match="apt-get install bubblewrap.*confinement='lexical'"):
        create_local_shell_backend(layout, bwrap=str(layout / "no-bwrap"))
    with pytest.raises(UserError, match="confinement"):
        create_local_shell_backend(layout, confinement="none")  # type: ignore[arg-type]
    lexical = create_local_shell_backend(layout, confinement="lexical", bwrap=str(layout / "no-bwrap"))
    assert lexical.execute("echo plain").output == "plain\n"
    assert "refused" in lexical.execute("cat /etc/passwd").output


@pytest.mark.parametrize("shell", [False, True])
def test_file_tools_refuse_symlinks_out_and_nul_bytes_without_ending_the_run(layout: Path, shell: bool) -> None:
    from ai_utils.deep import create_workspace_backend

    backend = create_local_shell_backend(layout) if shell else create_workspace_backend(layout)
    calls = [
        ("delete", {"file_path": "/workspace/lnk/secret.txt"}),
        ("delete", {"file_path": "/workspace/a\x00b"}),
        ("read_file", {"file_path": "/workspace/a\x00b"}),
        ("write_file", {"file_path": "/workspace/a\x00b", "content": "x"}),
        ("edit_file", {"file_path": "/workspace/lnk/secret.txt", "old_string": "O", "new_string": "X"}),
        ("ls", {"path": "/workspace/lnk"}),
        ("write_file", {"file_path": "/workspace/ok.txt", "content": "fine"}),
    ]
    model = FakeChatModel([*({"tool_calls": [{"name": n, "args": a}]} for n, a in calls), "done"])
    agent = DeepAgent(llm=model, backend=backend, permissions=workspace_permissions(), checkpointer=False)
    assert agent.invoke("go") == "done"
    results = [str(call[-1].content) for call in model.calls[1:] if isinstance(call[-1], ToolMessage)]
    assert len(results) == len(calls)
    for result in results[:6]:
        assert "Error" in result or "outside" in result, result
        assert str(layout.parent) not in result, result
        assert SECRET not in result
    assert (layout.parent / "outside" / "secret.txt").read_text() == SECRET
    assert (layout / "ok.txt").read_text() == "fine"


def test_extra_read_only_host_folders_are_visible_but_not_writable(layout: Path) -> None:
    tools = layout.parent / "tools"
    tools.mkdir()
    (tools / "greet.sh").write_text("echo hello from tools\n")
    backend = create_local_shell_backend(layout, read_only_paths=[tools])
    results = _run(backend, [f"sh {tools}/greet.sh", f"touch {tools}/x", f"cat {layout.parent}/outside/secret.txt"])
    assert "hello from tools" in results[0]
    assert "refused" in results[1] or "Read-only" in results[1]
    assert not (tools / "x").exists()
    assert SECRET not in results[2]
    with pytest.raises(UserError, match="read_only_paths"):
        create_local_shell_backend(layout, read_only_paths=[layout.parent / "missing"])
    with pytest.raises(UserError, match="confinement='os'"):
        create_local_shell_backend(layout, read_only_paths=[tools], confinement="lexical")


def test_a_read_denied_folder_inside_a_write_denied_one_stays_hidden(layout: Path) -> None:
    from ai_utils.deep import deny_write

    (layout / "docs" / "private").mkdir(parents=True)
    (layout / "docs" / "guide.md").write_text("guide")
    (layout / "docs" / "private" / "salary.txt").write_text("DENIED-SALARY")
    rules = deny_read("/workspace/docs/private/**") + deny_write("/workspace/docs/**") + workspace_permissions()
    results = _run(
        create_local_shell_backend(layout),
        ["cat doc?/guide.md; grep -r DENIED .; cd doc? && echo x > new.txt"],
        rules,
    )
    assert "guide" in results[0]
    assert "DENIED-SALARY" not in results[0]
    assert "Read-only file system" in results[0]
    assert not (layout / "docs" / "new.txt").exists()


def test_a_host_where_bubblewrap_cannot_make_namespaces_fails_at_construction(layout: Path) -> None:
    # What bwrap prints inside a container whose seccomp profile forbids user namespaces.
    fake = layout.parent / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(UserError, match="No permissions to create new namespace.*confinement='lexical'"):
        create_local_shell_backend(layout, bwrap=str(fake))
    from ai_utils.deep import create_sandbox_backend

    with pytest.raises(UserError, match="cannot create a sandbox"):
        create_sandbox_backend(layout, bwrap=str(fake))
