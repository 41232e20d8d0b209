"""The bubblewrap sandbox's limits and unprivileged uid, exercised by a scripted model through `DeepAgent`."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from ai_utils import DeepAgent
from ai_utils.deep import BwrapSandboxBackend, create_sandbox_backend, workspace_permissions
from ai_utils.exceptions import UserError
from ai_utils.testing import FakeChatModel


def _run(backend: Any, calls: list[Any]) -> list[str]:
    """Let a scripted model call tools (``execute`` for plain strings); return the tool results it saw."""
    replies: list[Any] = []
    for call in calls:
        name, args = ("execute", {"command": call}) if isinstance(call, str) else call
        replies.append({"tool_calls": [{"name": name, "args": args}]})
    model = FakeChatModel([*replies, "done"])
    agent = DeepAgent(llm=model, backend=backend, permissions=workspace_permissions(), checkpointer=False)
    assert agent.invoke("go") == "done"
    results = []
    for index in range(1, len(calls) + 1):
        last = model.calls[index][-1]
        assert isinstance(last, ToolMessage)
        results.append(str(last.content))
    return results


def test_defaults_are_safe(tmp_path: Path) -> None:
    limits = BwrapSandboxBackend(tmp_path).limits
    assert limits == {
        "max_processes": 128,
        "max_file_size": 1 << 30,
        "max_memory": 4 << 30,
        "max_cpu_seconds": 300,
        "tmp_size": 256 << 20,
    }


def test_a_fork_bomb_is_stopped_and_the_next_command_runs(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path, timeout=3, max_processes=32)
    started = time.monotonic()
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 1; ps -e --no-headers | wc -l"
    results = _run(backend, [bomb, "echo alive"])
    assert time.monotonic() - started < 10
    assert "Cannot fork" in results[0]
    assert "alive" in results[1]


def test_a_2_gb_file_and_a_1_gb_tmpfs_write_are_stopped(tmp_path: Path) -> None:
    files = create_sandbox_backend(tmp_path / "a", max_file_size=8 << 20)
    (written,) = _run(files, ["head -c 2G /dev/zero > big.bin; ls -l big.bin"])
    assert (tmp_path / "a" / "big.bin").stat().st_size <= 8 << 20
    assert "File size limit exceeded" in written
    tmp = create_sandbox_backend(tmp_path / "b", max_file_size=None, tmp_size=16 << 20)
    (filled,) = _run(tmp, ["head -c 1G /dev/zero > /tmp/big; du -m /tmp/big"])
    assert "No space left on device" in filled
    assert filled.split("\n")[1].split()[0] in ("15", "16")


def test_memory_and_cpu_time_are_limited(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path, timeout=30, max_memory=512 << 20, max_cpu_seconds=1)
    started = time.monotonic()
    results = _run(
        backend,
        [
            "python3 -c 'bytearray(2 ** 31)'",
            "python3 -c 'while True: pass'",
        ],
    )
    assert "MemoryError" in results[0]
    assert "exit code" in results[1]
    assert "timed out" not in results[1]
    assert time.monotonic() - started < 20


def test_it_runs_as_an_unprivileged_uid_so_a_setuid_bit_is_harmless(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path)
    results = _run(
        backend,
        [
            ("write_file", {"file_path": "/workspace/notes.txt", "content": "one\n"}),
            "id -u; echo two >> notes.txt; cat notes.txt",
            "cp /bin/sh ./sh && chmod u+s ./sh && ls -l sh; ./sh -c 'id -u'",
            "grep CapEff /proc/self/status",
        ],
    )
    assert results[1].split()[0] == "65534"
    assert "one\ntwo" in results[1]
    assert (tmp_path / "notes.txt").read_text() == "one\ntwo\n"
    info = (tmp_path / "sh").stat()
    assert info.st_uid != 0 or not info.st_mode & stat.S_ISUID
    if os.geteuid() == 0:
        assert info.st_uid == 65534  # what it creates belongs to nobody on the host
    assert "0000000000000000" in results[3]


def _running(cmdline: bytes) -> bool:
    for proc in Path("/proc").iterdir():
        try:
            if (proc / "cmdline").read_bytes() == cmdline and (proc / "stat").read_text().split()[2] != "Z":
                return True
        except OSError:
            continue
    return False


def test_timeout_kills_the_tree_caps_the_model_and_long_commands_are_tool_errors(tmp_path: Path) -> None:
    backend = create_sandbox_backend(tmp_path, timeout=2)
    started = time.monotonic()
    results = _run(
        backend,
        [
            "setsid sleep 12 & sleep 30",
            ("execute", {"command": "sleep 30", "timeout": 3600}),
            "echo " + "a" * 200_000,
            "echo fine",
        ],
    )
    assert time.monotonic() - started < 12
    assert "timed out after 2 seconds" in results[0]
    assert "timed out after 2 seconds" in results[1]
    assert "over the limit of 65536 bytes" in results[2]
    assert "fine" in results[3]
    time.sleep(0.3)
    assert not _running(b"sleep\x0012\x00")


@pytest.mark.parametrize("option", [{"max_processes": 0}, {"tmp_size": "big"}, {"max_threads": 3}])
def test_bad_limits_are_user_errors(tmp_path: Path, option: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        create_sandbox_backend(tmp_path, **option)


def test_the_agents_deny_rules_hide_workspace_paths_in_the_sandbox_too(tmp_path: Path) -> None:
    from ai_utils.deep import deny_read

    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key.txt").write_text("DENIED-KEY-88")
    replies = [
        {"tool_calls": [{"name": "execute", "args": {"command": c}}]}
        for c in ("grep -r DENIED .", "cd secret? && cat key.txt", "echo ok > other.txt && cat other.txt")
    ]
    model = FakeChatModel([*replies, "done"])
    rules = deny_read("/workspace/secrets/**") + workspace_permissions()
    agent = DeepAgent(llm=model, backend=create_sandbox_backend(tmp_path), permissions=rules, checkpointer=False)
    assert agent.invoke("go") == "done"
    results = [str(call[-1].content) for call in model.calls[1:]]
    assert all("DENIED-KEY-88" not in result for result in results)
    assert "ok" in results[2]
