from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend
from langchain_core.messages import ToolMessage

from ai_utils.deep.backends import (
    create_filesystem_backend,
    create_local_shell_backend,
    create_state_backend,
    create_workspace_backend,
)
from ai_utils.deep.permissions import workspace_permissions
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


def _running(cmdline: bytes) -> bool:
    """Whether a live (not zombie) host process has exactly this ``/proc/PID/cmdline``."""
    for proc in Path("/proc").iterdir():
        try:
            if (proc / "cmdline").read_bytes() == cmdline and (proc / "stat").read_text().split()[2] != "Z":
                return True
        except OSError:
            continue
    return False


def test_state_backend_keeps_files_in_the_graph_state() -> None:
    backend = create_state_backend()
    assert isinstance(backend, StateBackend)
    results = _tool_results(
        backend,
        [("write_file", {"file_path": "/notes.txt", "content": "n1"}), ("read_file", {"file_path": "/notes.txt"})],
    )
    assert "n1" in results[1]


def test_filesystem_backend_anchors_paths_at_root_dir(tmp_path: Path) -> None:
    backend = create_filesystem_backend(tmp_path / "new")
    assert isinstance(backend, FilesystemBackend)
    backend.write("/a.txt", "A")
    assert (tmp_path / "new" / "a.txt").read_text() == "A"
    assert backend.read("/../secret").error == "Error reading file '/../secret': the path is outside the workspace"


def test_workspace_backend_maps_the_route_to_root_dir_only(tmp_path: Path) -> None:
    backend = create_workspace_backend(tmp_path, route="/workspace/")
    assert isinstance(backend, CompositeBackend)
    assert backend.write("/workspace/x.txt", "X").error is None
    assert (tmp_path / "x.txt").read_text() == "X"
    assert backend.read("/workspace/x.txt").file_data == {"content": "X", "encoding": "utf-8"}
    for path in ("/x.txt", "/etc/passwd", "/tmp/y.txt"):
        assert "outside the workspace" in (backend.write(path, "no").error or "")
        assert "outside the workspace" in (backend.read(path).error or "")
        assert "outside the workspace" in (backend.edit(path, "a", "b").error or "")
        assert "outside the workspace" in (backend.delete(path).error or "")
        assert "outside the workspace" in (backend.ls(path).error or "")
        assert "outside the workspace" in (backend.glob("*", path).error or "")
        assert "outside the workspace" in (backend.grep("x", path).error or "")
    assert [e["path"] for e in backend.ls("/").entries or []] == ["/workspace/"]
    assert [m["path"] for m in backend.glob("**/*.txt", "/").matches or []] == ["/workspace/x.txt"]
    assert [m["path"] for m in backend.grep("X", "/").matches or []] == ["/workspace/x.txt"]
    uploads = backend.upload_files([("/workspace/u.bin", b"U"), ("/etc/u.bin", b"U")])
    assert [u.error for u in uploads] == [None, "permission_denied"]
    downloads = backend.download_files(["/workspace/u.bin", "/etc/passwd"])
    assert downloads[0].content == b"U"
    assert downloads[1].error == "permission_denied"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["u.bin", "x.txt"]


def test_every_file_tool_refuses_traversal_symlinks_and_host_paths(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside.txt").write_text("OUTSIDE")
    (root / "link.txt").symlink_to(tmp_path / "outside.txt")
    (root / "ok.txt").write_text("inside")
    calls: list[tuple[str, dict[str, object]]] = []
    for path in ("/workspace/../outside.txt", "/workspace/link.txt", "/etc/passwd"):
        calls += [
            ("read_file", {"file_path": path}),
            ("write_file", {"file_path": path, "content": "pwned"}),
            ("edit_file", {"file_path": path, "old_string": "O", "new_string": "X"}),
            ("ls", {"path": path}),
            ("glob", {"pattern": "*", "path": path}),
            ("grep", {"pattern": "root", "path": path}),
        ]
    calls.append(("read_file", {"file_path": "/workspace/ok.txt"}))
    results = _tool_results(create_workspace_backend(root), calls, permissions=workspace_permissions())
    *refusals, ok = results
    for (name, args), result in zip(calls, refusals, strict=False):
        assert "OUTSIDE" not in result, (name, args, result)
        assert "root:x" not in result, (name, args, result)
        assert result.startswith("Error") or "outside" in result or "No files found" in result, (name, args, result)
    assert "inside" in ok
    assert (tmp_path / "outside.txt").read_text() == "OUTSIDE"
    assert sorted(p.name for p in root.iterdir()) == ["link.txt", "ok.txt"]


def test_large_command_output_is_offloaded_into_graph_state_not_refused(tmp_path: Path) -> None:
    backend = create_local_shell_backend(tmp_path)
    results = _tool_results(backend, [("execute", {"command": "seq 1 40000"})])
    assert "/large_tool_results/" in results[0]
    assert "outside the workspace" not in results[0]
    assert list(tmp_path.iterdir()) == []


def test_local_shell_timeout_kills_the_process_group_and_output_is_limited(tmp_path: Path) -> None:
    backend = create_local_shell_backend(tmp_path, timeout=1, max_output_bytes=50)
    (tmp_path / "run.sh").write_text("sleep 31.5 &\nwait\n")
    result = backend.execute("sh run.sh")
    assert result.exit_code == 124
    time.sleep(0.2)
    assert not _running(b"sleep\x0031.5\x00")
    long = backend.execute("seq 1 1000")
    assert long.truncated
    assert long.output.startswith("1\n2\n")
    assert backend.execute("").exit_code == 1


def test_local_shell_rewrites_route_paths_and_uses_a_clean_environment(tmp_path: Path) -> None:
    backend = create_local_shell_backend(tmp_path, "/ws/", env={"GREETING": "hallo"})
    backend.write("/ws/a.txt", "A")
    assert backend.execute("cat /ws/a.txt").output == "A"
    env = dict(line.split("=", 1) for line in backend.execute("env").output.splitlines())
    assert set(env) == {"HOME", "PATH", "LANG", "PWD", "GREETING"}
    assert env["GREETING"] == "hallo"
    assert env["HOME"] == str(tmp_path.resolve())
    assert "refused" in backend.execute("cat /workspace/a.txt").output


async def test_async_file_operations_are_confined_too(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("needle")
    for backend in (create_workspace_backend(tmp_path), create_local_shell_backend(tmp_path)):
        found = await backend.agrep("needle", "/")
        assert [m["path"] for m in found.matches or []] == ["/workspace/a.txt"]
        assert "outside the workspace" in ((await backend.aread("/etc/passwd")).error or "")
        assert "outside the workspace" in ((await backend.agrep("root", "/etc")).error or "")
