from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import LocalShellBackend
from langchain_core.messages import ToolMessage

from ai_utils.deep.backends import create_local_shell_backend
from ai_utils.deep.permissions import (
    CommandPolicy,
    allow_read,
    allow_write,
    deny_read,
    deny_write,
    workspace_permissions,
)
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


def test_workspace_permissions_stay_inside_the_route() -> None:
    rules = workspace_permissions("/workspace")
    assert len(rules) == 1
    assert rules[0].mode == "allow"
    assert set(rules[0].operations) == {"read", "write"}
    assert rules[0].paths == ["/workspace/**"]


def test_helpers_build_one_rule_each() -> None:
    assert allow_read("/workspace/**")[0].operations == ["read"]
    assert allow_write("/workspace/**")[0].mode == "allow"
    assert deny_read("/workspace/secret/**")[0].mode == "deny"
    assert deny_write("/workspace/a", "/workspace/b")[0].paths == ["/workspace/a", "/workspace/b"]


@pytest.mark.parametrize("paths", [(), ("relative/**",), ("/workspace/../etc",), ("/~/x",)])
def test_bad_rule_paths_are_user_errors(paths: tuple[str, ...]) -> None:
    with pytest.raises(UserError):
        deny_read(*paths)


@pytest.mark.parametrize("route", ["/", "workspace/", "/a/../b/"])
def test_bad_routes_are_user_errors(route: str) -> None:
    with pytest.raises(UserError, match="route"):
        workspace_permissions(route)


def test_deepagents_alone_refuses_permissions_with_a_shell_backend(tmp_path: Path) -> None:
    with pytest.raises(NotImplementedError):
        create_deep_agent(
            model=FakeChatModel(["x"]),
            backend=LocalShellBackend(root_dir=tmp_path, virtual_mode=True),
            permissions=workspace_permissions(),
        )


def test_policy_refuses_escapes_and_allows_workspace_paths(tmp_path: Path) -> None:
    policy = CommandPolicy()
    (tmp_path / "link").symlink_to("/etc/passwd")
    refused = [
        "cat /etc/passwd",
        "cd .. && ls",
        "ls ~",
        "echo $HOME",
        "echo `id`",
        "cat link",
        f"cat {tmp_path.parent}/x",
        "cat 'unclosed",
        "cd && cat .bashrc",
        "cd; ls",
        "cd -P",
        "cd - && ls",
        "FOO=1 pushd",
        'bash -c "cd; cat .profile"',
        "sh -c 'ls ..'",
        "eval cat /etc/hostname",
    ]
    for command in refused:
        assert policy.check(command, root_dir=tmp_path, route="/workspace/") is not None, command
    allowed = [
        "ls -la",
        "cat /workspace/a.txt",
        f"cat {tmp_path}/a.txt",
        "echo hi > out.txt 2>/dev/null",
        "ls /workspace",
        "cd sub && ls",
        "cd -P sub",
        'bash -c "ls -la"',
    ]
    for command in allowed:
        assert policy.check(command, root_dir=tmp_path, route="/workspace/") is None, command


def test_policy_allow_list_and_deny_patterns(tmp_path: Path) -> None:
    policy = CommandPolicy(allow=("ls", "echo"), deny=(r"\brm\b",))
    assert policy.check("ls && echo hi | ls", root_dir=tmp_path, route="/workspace/") is None
    assert "python3" in (policy.check("python3 x.py", root_dir=tmp_path, route="/workspace/") or "")
    assert "deny pattern" in (policy.check("echo rm", root_dir=tmp_path, route="/workspace/") or "")
    assert policy.check("FOO=1 ls", root_dir=tmp_path, route="/workspace/") is None


def test_local_shell_with_workspace_permissions_runs_in_the_workspace_and_refuses_escapes(tmp_path: Path) -> None:
    backend = create_local_shell_backend(tmp_path, "/workspace/")
    results = _tool_results(
        backend,
        [
            ("write_file", {"file_path": "/workspace/index.html", "content": "<h1>hi</h1>"}),
            ("execute", {"command": "pwd && cat index.html"}),
            ("execute", {"command": "cat /etc/passwd"}),
            ("execute", {"command": "cd .. && ls"}),
            ("read_file", {"file_path": "/etc/passwd"}),
            ("write_file", {"file_path": "/workspace/../outside.txt", "content": "x"}),
            ("write_file", {"file_path": "/etc/ai_utils_test", "content": "x"}),
        ],
        permissions=workspace_permissions("/workspace/"),
    )
    assert (tmp_path / "index.html").read_text() == "<h1>hi</h1>"
    assert str(tmp_path.resolve()) in results[1]
    assert "<h1>hi</h1>" in results[1]
    assert "refused" in results[2]
    assert "root:" not in results[2]
    assert "refused" in results[3]
    assert "outside the workspace" in results[4]
    assert "root:" not in results[4]
    assert "Error" in results[5]
    assert not (tmp_path.parent / "outside.txt").exists()
    assert results[4].startswith("Error: '/etc/passwd' is outside the workspace")
    assert results[6].startswith("Error: '/etc/ai_utils_test' is outside the workspace")
    assert not any("Error: Error" in result for result in results)


def test_deny_rules_block_file_tools_and_commands(tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key.txt").write_text("s3cret")
    rules = deny_read("/workspace/secret/**") + deny_write("/workspace/secret/**") + workspace_permissions()
    backend = create_local_shell_backend(tmp_path, policy=CommandPolicy(deny=(r"\bcurl\b",)), permissions=rules)
    results = _tool_results(
        backend,
        [
            ("read_file", {"file_path": "/workspace/secret/key.txt"}),
            ("execute", {"command": "cat secret/key.txt"}),
            ("execute", {"command": "curl http://127.0.0.1:9"}),
            ("write_file", {"file_path": "/workspace/secret/key.txt", "content": "x"}),
            ("execute", {"command": "echo ok"}),
        ],
        permissions=rules,
    )
    assert "permission denied" in results[0]
    assert "permission denied" in results[1]
    assert "deny pattern" in results[2]
    assert "permission denied" in results[3]
    assert "ok" in results[4]
    assert (tmp_path / "secret" / "key.txt").read_text() == "s3cret"


def test_the_model_is_told_the_true_shell_path_mapping(tmp_path: Path) -> None:
    model = FakeChatModel(["ok"])
    agent: Any = create_deep_agent(model=model, backend=create_local_shell_backend(tmp_path))
    agent.invoke({"messages": [("user", "hi")]})
    system_prompt = model.calls[0][0].text
    assert f"`/workspace/` -> `{tmp_path.resolve()}/`" in system_prompt
    assert "not accessible from the shell):" not in system_prompt
