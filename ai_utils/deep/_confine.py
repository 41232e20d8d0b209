"""OS confinement for shell commands with bubblewrap (``bwrap``), shared by both shell backends.

One command line builder (`BwrapCommand`) decides what a command sees: the host toolchain
read-only, a private ``/proc`` (own PID namespace), ``/dev`` and size-limited ``/tmp``, the
workspace as the only host folder it can write, workspace paths denied by permission rules hidden
(``/dev/null`` or an empty read-only folder over them) or read-only, an empty read-only root
everywhere else, no capabilities and no further user namespaces. Resource limits are applied
inside the sandbox with ``prlimit`` so that they count only the sandbox's own processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

from typing_extensions import TypedDict

from ai_utils.exceptions import UserError

try:
    from wcmatch import glob as wcglob
except ImportError as _import_error:  # pragma: no cover - wcmatch comes with deepagents
    from ai_utils._optional import missing_extra

    raise missing_extra("deepagents", extra="deep", feature="the DeepAgent backends") from _import_error

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from deepagents.middleware.filesystem import FilesystemPermission

__all__ = ["BwrapCommand", "Confinement", "Limits", "check_limits", "denied_mounts", "find_bwrap", "probe_bwrap"]

SYSTEM_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
# Only what programs commonly need to start (loader, TLS roots, time zone, name resolution);
# no passwd/shadow/group or other host configuration.
ETC_FILES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/localtime",
)
NETWORK_ETC_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf")
_GLOB_FLAGS = wcglob.BRACE | wcglob.GLOBSTAR
_GLOB_CHARS = frozenset("*?[{")
_probed: dict[tuple[str, int | None], str | None] = {}


class Limits(TypedDict, total=False):
    """Resource limits per command (each process in the sandbox; ``None`` = no limit).

    Keys:
        max_processes: processes and threads of the sandbox user (``RLIMIT_NPROC``).
        max_file_size: bytes one file may grow to (``RLIMIT_FSIZE``).
        max_memory: bytes of address space per process (``RLIMIT_AS``).
        max_cpu_seconds: CPU seconds per process (``RLIMIT_CPU``).
        tmp_size: bytes of the private ``/tmp`` (a tmpfs).
    """

    max_processes: int | None
    max_file_size: int | None
    max_memory: int | None
    max_cpu_seconds: int | None
    tmp_size: int | None


_PRLIMIT_FLAGS = {
    "max_processes": "--nproc",
    "max_file_size": "--fsize",
    "max_memory": "--as",
    "max_cpu_seconds": "--cpu",
}


def check_limits(limits: Limits) -> None:
    """Raise `UserError` for a limit that is not a positive int or ``None``."""
    for name, value in limits.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            msg = f"{name} must be a positive int or None, got {value!r}; pass e.g. {name}=64."
            raise UserError(msg)


def find_bwrap(bwrap: str | None) -> str:
    """The ``bwrap`` binary, or `UserError` naming what to install."""
    binary = shutil.which(bwrap or "bwrap")
    if binary is None:
        msg = f"bubblewrap ({bwrap or 'bwrap'!r}) is not installed; install it with `apt-get install bubblewrap`."
        raise UserError(msg)
    return binary


def probe_bwrap(binary: str, *, switch_uid: int | None = None) -> None:
    """Run one trivial confined command (cached); `UserError` when this host cannot confine.

    Args:
        binary: the ``bwrap`` path.
        switch_uid: as for `BwrapCommand` (root mode without a user namespace).
    """
    key = (binary, switch_uid)
    if key not in _probed:
        command = BwrapCommand(
            binary=binary, workspace=Path("/usr"), mount="/usr", writable=False, switch_uid=switch_uid
        )
        try:
            done = subprocess.run(
                command.argv("true"), capture_output=True, timeout=30, check=False, env={}, stdin=subprocess.DEVNULL
            )
            _probed[key] = None if done.returncode == 0 else done.stderr.decode(errors="replace").strip()
        except (OSError, subprocess.SubprocessError) as error:
            _probed[key] = str(error)
    problem = _probed[key]
    if problem is not None:
        msg = (
            f"bubblewrap cannot create a sandbox on this host ({problem}); it needs unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0) or a "
            "setuid bwrap, and util-linux (setpriv, prlimit). For the local shell only, "
            "confinement='lexical' runs without it (bypassable)."
        )
        raise UserError(msg)


@dataclass(frozen=True)
class BwrapCommand:
    """What a confined command sees; `argv` builds the ``bwrap`` command line.

    Args:
        binary: the ``bwrap`` path.
        workspace: the host folder.
        mount: where ``workspace`` appears (also the working directory).
        extra_mounts: more places where ``workspace`` appears (e.g. the route).
        writable: mount the workspace read-write.
        network: keep the host network (else only loopback).
        host_read_only: more host folders or files, read-only at the same path.
        uid: the uid inside the sandbox (with a user namespace).
        switch_uid: run as root without a user namespace and switch to this host uid inside.
        limits: resource limits.
        hidden: host paths inside the workspace to hide (deny read).
        read_only: host paths inside the workspace to mount read-only (deny write).
    """

    binary: str
    workspace: Path
    mount: str
    extra_mounts: tuple[str, ...] = ()
    writable: bool = True
    network: bool = False
    host_read_only: tuple[str, ...] = ()
    uid: int = 65534
    switch_uid: int | None = None
    limits: Limits = field(default_factory=lambda: Limits())
    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()

    def argv(self, command: str) -> list[str]:
        """The full command line running ``/bin/sh -c command`` in the sandbox."""
        if self.switch_uid is None:
            # Any user: a user namespace of our own, no capabilities, no nested namespaces.
            identity = ["--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(self.uid)]
            identity += ["--gid", str(self.uid), "--cap-drop", "ALL"]
        else:
            # As root: no user namespace (its uids would map to host root); setpriv below switches to a
            # real unprivileged host uid, so files it makes (and any setuid bit on them) belong to that uid.
            identity = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        args = [
            self.binary,
            *identity,
            *(["--share-net"] if self.network and self.switch_uid is None else []),
            "--die-with-parent",
            "--new-session",
            *_system_mounts(network=self.network),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        if self.network and self.switch_uid is not None:
            args.remove("--unshare-net")
        tmp_size = self.limits.get("tmp_size")
        args += ["--perms", "1777", *(["--size", str(tmp_size)] if tmp_size else []), "--tmpfs", "/tmp"]
        for path in self.host_read_only:
            args += ["--ro-bind", path, path]
        bind = "--bind" if self.writable else "--ro-bind"
        for target in (self.mount, *self.extra_mounts):
            for parent in reversed(PurePosixPath(target).parents[:-1]):
                if not str(parent).startswith(("/tmp", *SYSTEM_DIRS)):
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += [bind, str(self.workspace), target]
            args += self._overlays(target)
        args += ["--remount-ro", "/", "--chdir", self.mount, "--"]
        if self.switch_uid is not None:
            uid = str(self.switch_uid)
            args += ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
            args += ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        prlimits = [f"{flag}={self.limits[key]}" for key, flag in _PRLIMIT_FLAGS.items() if self.limits.get(key)]  # type: ignore[literal-required]
        if prlimits:
            args += ["/usr/bin/prlimit", *prlimits, "--"]
        return [*args, "/bin/sh", "-c", command]

    def _overlays(self, target: str) -> list[str]:
        args: list[str] = []
        for path in self.read_only:
            args += ["--ro-bind", str(path), _inside(path, self.workspace, target)]
        for path in self.hidden:
            inner = _inside(path, self.workspace, target)
            if path.is_dir():
                args += ["--perms", "0555", "--size", "4096", "--tmpfs", inner, "--remount-ro", inner]
            else:
                args += ["--ro-bind", "/dev/null", inner]
        return args


def _inside(path: Path, workspace: Path, target: str) -> str:
    relative = path.relative_to(workspace).as_posix()
    return target if relative == "." else f"{target.rstrip('/')}/{relative}"


def _system_mounts(*, network: bool) -> list[str]:
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        path = Path(directory)
        if path.is_symlink():  # merged-/usr systems: /lib -> usr/lib
            args += ["--symlink", os.readlink(path), directory]
        elif path.is_dir():
            args += ["--ro-bind", directory, directory]
    args += ["--perms", "0755", "--dir", "/etc"]  # bwrap makes missing folders 0700; the sandbox uid must enter it
    for name in (*ETC_FILES, *(NETWORK_ETC_FILES if network else ())):
        if Path(name).exists():
            args += ["--ro-bind", name, name]
    return args


def denied_mounts(
    root: Path, route: str, rule_sets: Sequence[Sequence[FilesystemPermission]]
) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """The existing workspace paths that the rules deny reading (hide) and writing (read-only).

    A path is denied when, in any one rule list, the first rule that covers the operation and
    matches the path is a ``deny`` rule (deepagents' first-match-wins order). A folder whose
    contents are denied (``/workspace/secrets/**``) is hidden as a whole. Only the parts of the
    workspace named by a deny rule's literal prefix are walked, so a command stays cheap in a big
    workspace.

    Args:
        root: the host workspace folder.
        route: the workspace prefix (``/workspace/``).
        rule_sets: permission lists (the backend's and the agent's).

    Returns:
        ``(hidden, read_only)`` host paths.
    """
    deny_rules = [rule for rules in rule_sets for rule in rules if rule.mode == "deny"]
    if not deny_rules:
        return (), ()
    starts = {_walk_start(pattern, root, route) for rule in deny_rules for pattern in rule.paths}
    hidden: list[Path] = []
    read_only: list[Path] = []
    for path, virtual, is_dir in _walk(root, route, {s for s in starts if s is not None}):
        probe = virtual + "/" if is_dir else virtual
        if _denied(rule_sets, "read", virtual) or (is_dir and _denied(rule_sets, "read", probe)):
            hidden.append(path)
        elif _denied(rule_sets, "write", virtual) or (is_dir and _denied(rule_sets, "write", probe)):
            read_only.append(path)
    # A path under a hidden folder is covered by it, and so is a read-only path under a read-only folder;
    # a hidden path under a read-only folder stays (read-only mounts go first, see `BwrapCommand`).
    hidden = _outermost(hidden)
    read_only = [p for p in _outermost(read_only) if not any(p.is_relative_to(h) for h in hidden)]
    return tuple(hidden), tuple(read_only)


def _outermost(paths: list[Path]) -> list[Path]:
    keep: list[Path] = []
    for path in sorted(paths, key=lambda p: len(p.parts)):
        if not any(path.is_relative_to(parent) for parent in keep):
            keep.append(path)
    return keep


def _denied(rule_sets: Sequence[Sequence[FilesystemPermission]], operation: str, virtual: str) -> bool:
    for rules in rule_sets:
        for rule in rules:
            if operation in rule.operations and any(
                wcglob.globmatch(virtual, pattern, flags=_GLOB_FLAGS) for pattern in rule.paths
            ):
                if rule.mode == "deny":
                    return True
                break
    return False


def _walk_start(pattern: str, root: Path, route: str) -> Path | None:
    """The deepest host folder that contains every match of ``pattern`` (``None``: outside the route)."""
    if not (pattern.startswith(route) or pattern == route.rstrip("/")):
        return None
    literal: list[str] = []
    for part in PurePosixPath(pattern[len(route) :]).parts:
        if _GLOB_CHARS & set(part):
            break
        literal.append(part)
    start = root.joinpath(*literal) if literal else root
    return start if start.is_relative_to(root) else None


def _walk(root: Path, route: str, starts: set[Path]) -> Iterator[tuple[Path, str, bool]]:
    seen: set[Path] = set()
    for start in sorted(starts, key=lambda p: len(p.parts)):
        while not start.exists() and start != root:  # the literal prefix may name a file glob's parent
            start = start.parent
        if any(start.is_relative_to(done) for done in seen):
            continue
        seen.add(start)
        if start != root:
            yield start, route + start.relative_to(root).as_posix(), start.is_dir() and not start.is_symlink()
        for folder, dirs, files in os.walk(start):
            base = Path(folder)
            for name in dirs:
                path = base / name
                if not path.is_symlink():  # a link's target has its own verdict; a link out leads nowhere inside
                    yield path, route + path.relative_to(root).as_posix(), True
            for name in files:
                path = base / name
                if not path.is_symlink():
                    yield path, route + path.relative_to(root).as_posix(), False


Confinement = Literal["os", "lexical"]
