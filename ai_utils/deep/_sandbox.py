"""Process runner shared by the shell backends, and the bubblewrap (``bwrap``) sandbox backend."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from ai_utils._optional import missing_extra
from ai_utils.exceptions import UserError

try:
    from deepagents.backends import FilesystemBackend
    from deepagents.backends.protocol import ExecuteResponse, SandboxBackendProtocol
except ImportError as _import_error:
    raise missing_extra("deepagents", extra="deep", feature="the DeepAgent backends") from _import_error

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["BwrapSandboxBackend", "run_limited"]

_SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
_SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/bin", "/sbin")
# Only what programs commonly need to start; no passwd/shadow/hosts or other host configuration.
_ETC_FILES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/localtime",
)


def run_limited(
    argv: Sequence[str],
    *,
    cwd: str | Path,
    env: Mapping[str, str],
    timeout: float,
    max_output_bytes: int,
) -> ExecuteResponse:
    """Run ``argv`` in its own process group with a time limit and an output limit.

    stdout and stderr are merged. On timeout the whole process group is killed (``SIGKILL``), so
    children such as ``sleep`` started by ``sh -c`` die too; the result then has exit code 124.
    Output past ``max_output_bytes`` is cut and ``truncated=True``.

    Args:
        argv: the program and its arguments.
        cwd: working directory.
        env: the complete environment of the process.
        timeout: seconds before the process group is killed.
        max_output_bytes: how much output is kept.

    Returns:
        The deepagents ``ExecuteResponse``.
    """
    with subprocess.Popen(
        list(argv),
        cwd=str(cwd),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    ) as process:
        try:
            raw, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            process.communicate()
            return ExecuteResponse(
                output=f"Error: command timed out after {timeout:g} seconds and was killed.",
                exit_code=124,
                truncated=False,
            )
    truncated = len(raw) > max_output_bytes
    output = raw[:max_output_bytes].decode("utf-8", errors="replace")
    if truncated:
        output += f"\n\n... output truncated at {max_output_bytes} bytes."
    return ExecuteResponse(output=output or "<no output>", exit_code=process.returncode, truncated=truncated)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # pragma: no cover - the group ended between timeout and kill
        pass


def _system_mounts() -> list[str]:
    args: list[str] = []
    for directory in _SYSTEM_DIRS:
        path = Path(directory)
        if path.is_symlink():  # merged-/usr systems: /lib -> usr/lib
            args += ["--symlink", os.readlink(path), directory]
        elif path.is_dir():
            args += ["--ro-bind", directory, directory]
    for name in _ETC_FILES:
        if Path(name).exists():
            args += ["--ro-bind", name, name]
    return args


class BwrapSandboxBackend(FilesystemBackend, SandboxBackendProtocol):
    """An isolated sandbox: each command runs in a fresh bubblewrap (``bwrap``) container.

    What the command sees: ``/usr`` (and ``/lib``, ``/bin``, ... as on the host) read-only, a few
    loader/TLS files from ``/etc`` read-only, fresh ``/proc``, ``/dev`` and ``/tmp``, and
    ``root_dir`` mounted read-write at ``mount`` (``/workspace``) (its working directory). Nothing else of the
    host filesystem exists inside. ``--unshare-all`` gives it its own network namespace with only
    loopback (no network), its own PID/IPC/UTS namespaces; ``--die-with-parent`` and
    ``--new-session`` stop it outliving us or reaching our terminal. The environment is just
    ``PATH``, ``HOME=/workspace`` and ``LANG``. Each command has a time limit (the process group is
    killed) and an output limit.

    File tools work on ``root_dir`` directly (``FilesystemBackend`` with ``virtual_mode=True``:
    ``/x.txt`` is ``<root_dir>/x.txt``; ``..``, ``~`` and symlinks leaving ``root_dir`` are
    refused).

    Args:
        root_dir: the host directory that becomes ``/workspace``; created if missing.
        timeout: default seconds per command.
        max_output_bytes: output kept per command.
        bwrap: path of the ``bwrap`` binary (default: found on ``PATH``).
        mount: where ``root_dir`` appears inside the sandbox.

    Raises:
        UserError: ``bwrap`` is not installed.
    """

    def __init__(
        self,
        root_dir: str | Path,
        *,
        timeout: float = 120,
        max_output_bytes: int = 100_000,
        bwrap: str | None = None,
        mount: str = "/workspace",
    ) -> None:
        """Create the sandbox over ``root_dir`` (see the class docstring)."""
        binary = shutil.which(bwrap or "bwrap")
        if binary is None:
            msg = f"bubblewrap ({bwrap or 'bwrap'!r}) is not installed; install it with `apt-get install bubblewrap`."
            raise UserError(msg)
        if timeout <= 0:
            msg = f"timeout must be positive, got {timeout!r}; pass seconds, e.g. timeout=120."
            raise UserError(msg)
        root = Path(root_dir).resolve()
        root.mkdir(parents=True, exist_ok=True)
        super().__init__(root_dir=root, virtual_mode=True)
        self._bwrap = binary
        self._timeout = timeout
        self._max_output_bytes = max_output_bytes
        self._mount = mount
        self._id = f"bwrap-{uuid.uuid4().hex[:8]}"

    @property
    def id(self) -> str:
        """Unique id of this sandbox instance."""
        return self._id

    def command_argv(self, command: str) -> list[str]:
        """The full ``bwrap`` command line that runs ``command`` (useful for audits).

        Args:
            command: the shell command.

        Returns:
            The argv list.
        """
        return [
            self._bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            *_system_mounts(),
            "--bind",
            str(self.cwd),
            self._mount,
            "--chdir",
            self._mount,
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--",
            "/bin/sh",
            "-c",
            command,
        ]

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Run ``command`` with ``sh -c`` inside the sandbox.

        Args:
            command: the shell command.
            timeout: seconds for this command (default: the backend's ``timeout``).

        Returns:
            Merged output, exit code and whether the output was truncated.
        """
        if not command or not isinstance(command, str):
            return ExecuteResponse(output="Error: command must be a non-empty string.", exit_code=1, truncated=False)
        limit = self._timeout if timeout is None or timeout <= 0 else timeout
        env = {"PATH": _SANDBOX_PATH, "HOME": self._mount, "LANG": "C.UTF-8"}
        return run_limited(
            self.command_argv(command),
            cwd=self.cwd,
            env=env,
            timeout=limit,
            max_output_bytes=self._max_output_bytes,
        )
