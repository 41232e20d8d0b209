from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from langchain_core.messages import ToolMessage

from ai_utils.deep._sandbox import BwrapSandboxBackend
from ai_utils.deep.backends import create_local_shell_backend, create_sandbox_backend, sandbox_shell_prompt
from ai_utils.deep.permissions import workspace_permissions
from ai_utils.exceptions import UserError
from ai_utils.testing import FakeChatModel


def _tool_results(backend: Any, calls: list[tuple[str, dict[str, object]]], **agent_kwargs: Any) -> list[str]:
    """Run a real deep agent whose model calls the given tools in order; return the tool results it saw."""
    replies: list[Any] = [{"tool_calls": [{"name": name, "args": args}]} for name, args in calls]
    model = FakeChatModel([*replies, "done"])
    agent: Any = create_deep_agent(model=model, backend=backend, **agent_kwargs)
    agent.invoke({"messages": [("user", "go")]})
    results: list[str] = []
    for index in range(1, len(calls) + 1):
        last = model.calls[index][-1]
        assert isinstance(last, ToolMessage)
        results.append(str(last.content))
    return results


def test_command_runs_in_the_workspace_and_files_land_in_root_dir(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path)
    result = backend.execute("echo hi > out.txt && cat out.txt && pwd")
    assert result.exit_code == 0
    assert result.output == "hi\n/workspace\n"
    assert (tmp_path / "out.txt").read_text() == "hi\n"


def test_only_the_workspace_is_writable_and_host_files_are_invisible(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path)
    result = backend.execute(f"touch /usr/x; touch /x; cat /etc/passwd; ls {Path.home()}; ls /")
    assert "Read-only file system" in result.output
    assert "root:x" not in result.output
    top = set(result.output.split())
    assert "home" not in top
    assert "root" not in top
    assert "workspace" in top
    assert not Path("/usr/x").exists()


def test_no_network_only_loopback(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path)
    interfaces = backend.execute("cat /proc/net/dev").output
    names = [line.split(":")[0].strip() for line in interfaces.splitlines()[2:]]
    assert names == ["lo"]
    attempt = backend.execute(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)\"",
    )
    assert attempt.exit_code != 0
    assert "unreachable" in attempt.output


def test_timeout_kills_the_whole_command(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path, timeout=30)
    started = time.monotonic()
    result = backend.execute("sleep 30 & sleep 30", timeout=1)
    assert time.monotonic() - started < 5
    assert result.exit_code == 124
    assert "timed out" in result.output


def test_output_limit_truncates(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path, max_output_bytes=100)
    result = backend.execute("seq 1 10000")
    assert result.truncated
    assert result.output.startswith("1\n2\n3\n")
    assert "truncated at 100 bytes" in result.output
    assert backend.execute("echo short").truncated is False


def test_custom_route_is_the_mount_point(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path, route="/project/")
    backend.write("/project/a.txt", "A")
    result = backend.execute("pwd && cat /project/a.txt")
    assert result.output == "/project\nA"


def test_bad_setup_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="system folder"):
        create_sandbox_backend(tmp_path, route="/usr/local/")
    with pytest.raises(UserError, match="bubblewrap"):
        create_sandbox_backend(tmp_path, bwrap=str(tmp_path / "missing-bwrap"))
    with pytest.raises(UserError, match="timeout"):
        BwrapSandboxBackend(tmp_path, timeout=0)
    assert create_sandbox_backend(tmp_path).execute("").exit_code == 1
    assert BwrapSandboxBackend(tmp_path).execute("").exit_code == 1


def test_agent_in_the_sandbox_cannot_see_the_host_or_the_network(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path)
    results = _tool_results(
        backend,
        [
            ("write_file", {"file_path": "/workspace/index.html", "content": "<p>x</p>"}),
            ("execute", {"command": "cat /workspace/index.html && ls /"}),
            ("execute", {"command": "cat /etc/passwd"}),
            ("execute", {"command": "cat /proc/net/dev | tail -n +3 | cut -d: -f1"}),
            ("read_file", {"file_path": "/etc/passwd"}),
        ],
        permissions=workspace_permissions(),
    )
    assert (tmp_path / "index.html").read_text() == "<p>x</p>"
    assert "<p>x</p>" in results[1]
    assert "home" not in results[1].split()
    assert "No such file" in results[2]
    assert results[3].split()[0] == "lo"
    assert "eth" not in results[3]
    assert "outside the workspace" in results[4]


async def test_async_execute_runs_in_the_sandbox(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path)
    result = await backend.aexecute("echo async")
    assert result.output == "async\n"


def test_sandbox_prompt_explains_that_the_route_works_in_the_shell(tmp_path: Path) -> None:
    note = sandbox_shell_prompt(create_sandbox_backend(tmp_path, route="/project/"))
    assert "`/project`" in note
    assert "no network" in note
    assert sandbox_shell_prompt(create_local_shell_backend(tmp_path)) == ""
    assert sandbox_shell_prompt(object()) == ""
