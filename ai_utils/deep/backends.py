"""Backends for `DeepAgent`: where its files live and where ``execute`` runs.

The workspace backends are deepagents ``CompositeBackend``s: ``route`` (``/workspace/``) maps to
``root_dir`` on disk (``/workspace/x.txt`` is ``<root_dir>/x.txt``; ``..``, ``~``, NUL bytes and
symlinks out of ``root_dir`` are refused with an error result), every other path is refused, and
``execute`` (if any) runs in the workspace under bubblewrap (`ai_utils.deep._confine`): the local
shell with the host toolchain and network, the sandbox without network, as an unprivileged uid and
with resource limits. Because all ``workspace_permissions`` rules lie inside the route, deepagents
accepts them with the shell backends too; their deny rules hide those paths from commands.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ai_utils._optional import missing_extra
from ai_utils.deep._confine import BwrapCommand, Confinement, Limits, denied_mounts, find_bwrap, probe_bwrap
from ai_utils.deep._sandbox import BwrapSandboxBackend, WorkspaceFiles, effective_timeout, run_limited
from ai_utils.deep._workspace import HostShell, RouteOnlyState, SandboxShell, workspace_composite, workspace_shell
from ai_utils.deep.permissions import CommandPolicy, normalize_route, to_host_command
from ai_utils.exceptions import UserError

try:
    from deepagents.backends import StateBackend
    from deepagents.backends.protocol import ExecuteResponse
except ImportError as _import_error:
    raise missing_extra("deepagents", extra="deep", feature="the DeepAgent backends") from _import_error

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import TypeAlias

    from deepagents.backends import CompositeBackend, FilesystemBackend
    from deepagents.middleware.filesystem import FilesystemPermission

    Runner: TypeAlias = Callable[[str, int | None, Sequence[Sequence[FilesystemPermission]]], ExecuteResponse]
    """``(command, model-supplied timeout, deny-rule sets) -> response``: how a workspace shell runs a command."""

__all__ = [
    "BwrapSandboxBackend",
    "attach_permissions",
    "create_filesystem_backend",
    "create_local_shell_backend",
    "create_sandbox_backend",
    "create_state_backend",
    "create_workspace_backend",
    "sandbox_shell_prompt",
]

_log = logging.getLogger(__name__)
_RESERVED_MOUNTS = ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/dev", "/tmp")
_warned_local_shell = False
_LOCAL_TMP_SIZE = 1 << 30  # the local shell's private /tmp lives in memory


def attach_permissions(backend: object, permissions: Sequence[FilesystemPermission] | None) -> None:
    """Let a shell backend also enforce the agent's own deny rules in ``execute``.

    `DeepAgent` calls this with its ``permissions``, so rules passed only to the agent confine the
    shell too: the denied workspace paths are hidden or read-only for commands (and the local shell's
    lexical check refuses them by name).
    """
    shell = workspace_shell(backend)
    if not permissions or shell is None:
        return
    rules = list(permissions)
    if rules not in shell.rule_sets:
        shell.rule_sets.append(rules)


def sandbox_shell_prompt(backend: object) -> str:
    """System-prompt text that tells the model how paths work in a `create_sandbox_backend` shell.

    deepagents describes every route as "not accessible from the shell" unless the shell is its own
    ``LocalShellBackend``; in our sandbox the route *is* mounted at the same path. Append this text
    to the system prompt (it is empty for any other backend).

    Args:
        backend: the agent's backend.

    Returns:
        The prompt section, or ``""``.
    """
    shell = workspace_shell(backend)
    if not isinstance(shell, SandboxShell):
        return ""
    route = shell.route
    return (
        "## Sandbox shell\n\n"
        f"The `execute` tool runs in an isolated sandbox whose working directory is `{route.rstrip('/')}`. "
        f"Paths under `{route}` from the file tools are the same files in shell commands, so `{route}` IS "
        "accessible from the shell (this overrides any note above saying otherwise). "
        "The sandbox has no network and cannot see other host files."
    )


def create_state_backend() -> StateBackend:
    """Files in the graph state (per thread, checkpointed, never on disk) — deepagents' default.

    Returns:
        A deepagents ``StateBackend``.
    """
    return StateBackend()


def create_filesystem_backend(root_dir: str | Path) -> FilesystemBackend:
    """Files on disk under ``root_dir``, which the agent sees as ``/`` (``..``/``~``/symlinks out refused).

    A refused path (through a symlink out, with a NUL byte) is an error result for the model, never an
    exception that ends the run, and the message names no host path.

    Args:
        root_dir: the folder; created if missing.

    Returns:
        A deepagents ``FilesystemBackend`` with ``virtual_mode=True``.
    """
    root = Path(root_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    return WorkspaceFiles(root)


def create_workspace_backend(root_dir: str | Path, route: str = "/workspace/") -> CompositeBackend:
    """``route`` on disk at ``root_dir``; every other path is refused; no ``execute``.

    Args:
        root_dir: the host folder; created if missing.
        route: the prefix the agent sees.

    Returns:
        A deepagents ``CompositeBackend``.
    """
    prefix = normalize_route(route)
    return workspace_composite(RouteOnlyState(prefix), create_filesystem_backend(root_dir))


def create_local_shell_backend(
    root_dir: str | Path,
    route: str = "/workspace/",
    *,
    policy: CommandPolicy | None = None,
    permissions: Sequence[FilesystemPermission] = (),
    timeout: float = 120,
    max_output_bytes: int = 100_000,
    env: dict[str, str] | None = None,
    confinement: Confinement = "os",
    bwrap: str | None = None,
    read_only_paths: Sequence[str | Path] = (),
) -> CompositeBackend:
    """The workspace backend plus ``execute`` in a shell on this machine, confined to the workspace.

    With ``confinement="os"`` (default) every command runs under bubblewrap: the host toolchain
    (``/usr``, ``/bin``, ``/lib*`` and a few loader/TLS/DNS files of ``/etc``, not ``passwd``)
    read-only, ``root_dir`` read-write at its host path (also at ``route`` when that is free) as the
    only writable host folder, workspace paths denied by ``permissions`` hidden (``deny_read``) or
    read-only (``deny_write``), a private 1 GiB ``/tmp``, its own PID namespace and ``/proc``, no
    capabilities, our uid, and the host network. Nothing else of the host exists inside (no
    ``/home``, ``/root``, host ``/tmp``, other processes). Deny rules cover the paths that exist when
    the command starts. At the time limit the whole process tree is killed.

    With ``confinement="lexical"`` commands run directly on the host, only checked by the lexical
    ``policy``: that can be bypassed (globs, symlinks, programs that build paths) — use it only
    where bubblewrap cannot run and the model is trusted.

    Either way each command is first checked by ``policy`` (`ai_utils.deep.permissions.CommandPolicy`;
    default: any program, workspace paths only) and against the deny rules — a fast filter with a
    clear message; refusals and commands over 64 KiB come back to the model as an error result. The
    environment is only ``PATH``, ``HOME=<root_dir>`` and ``LANG`` (plus ``env``). For untrusted code
    prefer `create_sandbox_backend` (no network, an unprivileged uid, resource limits).

    Args:
        root_dir: the host folder; created if missing.
        route: the prefix the agent sees.
        policy: the command policy.
        permissions: file rules whose deny entries also confine commands (`DeepAgent` adds its own
            ``permissions`` too).
        timeout: seconds per command; the most a model-supplied ``timeout`` can ask for.
        max_output_bytes: output kept per command.
        env: extra environment variables for commands.
        confinement: ``"os"`` (bubblewrap) or ``"lexical"`` (the policy only; bypassable).
        bwrap: path of the ``bwrap`` binary (default: found on ``PATH``).
        read_only_paths: more host folders commands may read (e.g. ``/opt/node``), at the same path.

    Returns:
        A deepagents ``CompositeBackend`` that supports ``execute``.

    Raises:
        UserError: bubblewrap is missing or cannot run here (with ``confinement="os"``), or a bad option.
    """
    global _warned_local_shell
    if confinement not in ("os", "lexical"):
        msg = f"confinement must be 'os' or 'lexical', got {confinement!r}; pass confinement='os'."
        raise UserError(msg)
    if timeout <= 0:
        msg = f"timeout must be positive, got {timeout!r}; pass seconds, e.g. timeout=120."
        raise UserError(msg)
    prefix = normalize_route(route)
    files = create_filesystem_backend(root_dir)
    root = files.cwd
    host_read_only = _host_paths(read_only_paths)
    if host_read_only and confinement == "lexical":
        msg = "read_only_paths needs confinement='os' (a lexical check cannot keep them read-only); drop one of them."
        raise UserError(msg)
    checker = policy or CommandPolicy()
    if host_read_only:
        checker = dataclasses.replace(checker, host_paths=(*checker.host_paths, *host_read_only))
    run_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(root), "LANG": "C.UTF-8", **(env or {})}
    sandbox: BwrapCommand | None = None
    if confinement == "os":
        try:
            binary = find_bwrap(bwrap)
        except UserError as error:
            raise UserError(f"{error} Or pass confinement='lexical' (a bypassable lexical check only).") from None
        probe_bwrap(binary)
        mount = prefix.rstrip("/")
        host = PurePosixPath(root)
        # Also at the route, unless that would hide a system folder or overlap the workspace's own host path.
        overlaps = host.is_relative_to(mount) or PurePosixPath(mount).is_relative_to(host)
        extra = () if overlaps or mount.startswith(_RESERVED_MOUNTS) else (mount,)
        sandbox = BwrapCommand(
            binary=binary,
            workspace=root,
            mount=str(root),
            extra_mounts=extra,
            network=True,
            uid=os.geteuid(),
            limits=Limits(tmp_size=_LOCAL_TMP_SIZE),
            host_read_only=host_read_only,
        )
    elif not _warned_local_shell:
        _log.warning("create_local_shell_backend(confinement='lexical') runs commands on the host; it is bypassable.")
        _warned_local_shell = True

    def run(
        command: str, command_timeout: int | None, rule_sets: Sequence[Sequence[FilesystemPermission]]
    ) -> ExecuteResponse:
        rules = [rule for rules in rule_sets for rule in rules]
        refusal = checker.check(command, root_dir=root, route=prefix, permissions=rules)
        if refusal is not None:
            return ExecuteResponse(output=f"Error: {refusal}", exit_code=126, truncated=False)
        host_command = to_host_command(command, root_dir=root, route=prefix)
        limit = effective_timeout(timeout, command_timeout)
        if sandbox is None:
            argv = ["/bin/sh", "-c", host_command]
        else:
            hidden, read_only = denied_mounts(root, prefix, rule_sets)
            argv = dataclasses.replace(sandbox, hidden=hidden, read_only=read_only).argv(host_command)
        return run_limited(argv, cwd=root, env=run_env, timeout=limit, max_output_bytes=max_output_bytes)

    return workspace_composite(HostShell(prefix, root, run, permissions), files)


def _host_paths(paths: Sequence[str | Path]) -> tuple[str, ...]:
    resolved = []
    for path in paths:
        real = Path(path).resolve()
        if not real.exists() or real == Path("/"):
            msg = (
                f"read_only_paths entry {str(path)!r} does not exist or is '/'; pass existing folders like '/opt/node'."
            )
            raise UserError(msg)
        resolved.append(str(real))
    return tuple(resolved)


def create_sandbox_backend(
    root_dir: str | Path,
    route: str = "/workspace/",
    *,
    timeout: float = 120,
    max_output_bytes: int = 100_000,
    **options: Any,
) -> CompositeBackend:
    """The workspace backend plus ``execute`` in an isolated bubblewrap sandbox.

    Each command runs in a fresh ``bwrap`` container (see `BwrapSandboxBackend`): no network, no
    host filesystem except read-only system folders, ``root_dir`` mounted read-write at ``route``
    (its working directory), so ``/workspace/x`` means the same file for file tools and commands.
    Needs the ``bubblewrap`` package (``apt-get install bubblewrap``).

    Args:
        root_dir: the host folder; created if missing.
        route: the prefix the agent sees and the mount point inside the sandbox.
        timeout: seconds per command; the most a model-supplied ``timeout`` can ask for.
        max_output_bytes: output kept per command.
        **options: passed to `BwrapSandboxBackend`: ``bwrap=`` path and the limits ``max_processes``,
            ``max_file_size``, ``max_memory``, ``max_cpu_seconds``, ``tmp_size`` (``None`` lifts one).

    Returns:
        A deepagents ``CompositeBackend`` that supports ``execute``.

    Raises:
        UserError: ``bwrap`` is missing or cannot run here, a bad limit, or ``route`` would hide a system folder.
    """
    prefix = normalize_route(route)
    mount = prefix.rstrip("/")
    if mount.startswith(_RESERVED_MOUNTS):
        msg = f"route {route!r} would cover a system folder in the sandbox; pass e.g. route='/workspace/'."
        raise UserError(msg)
    sandbox = BwrapSandboxBackend(root_dir, timeout=timeout, max_output_bytes=max_output_bytes, mount=mount, **options)

    def run(
        command: str, command_timeout: int | None, rule_sets: Sequence[Sequence[FilesystemPermission]]
    ) -> ExecuteResponse:
        hidden, read_only = denied_mounts(sandbox.cwd, prefix, rule_sets)
        return sandbox.run(command, command_timeout, hidden=hidden, read_only=read_only)

    return workspace_composite(SandboxShell(prefix, run, "bwrap"), sandbox)
