"""Process runner shared by the shell backends, and the bubblewrap (``bwrap``) sandbox backend."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ai_utils._optional import missing_extra
from ai_utils.deep._confine import BwrapCommand, Limits, check_limits, find_bwrap, probe_bwrap
from ai_utils.exceptions import UserError

try:
    from deepagents.backends import FilesystemBackend
    from deepagents.backends.protocol import ExecuteResponse, SandboxBackendProtocol
except ImportError as _import_error:
    raise missing_extra("deepagents", extra="deep", feature="the DeepAgent backends") from _import_error

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from deepagents.backends.protocol import FileUploadResponse, WriteResult

__all__ = ["MAX_COMMAND_BYTES", "BwrapSandboxBackend", "WorkspaceFiles", "command_problem", "run_limited"]

_SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
# Linux refuses a single argument over 128 KiB (E2BIG); we stop well before, with a tool error.
MAX_COMMAND_BYTES = 64 * 1024
_DEFAULT_LIMITS = Limits(
    max_processes=128,
    max_file_size=1 << 30,
    max_memory=4 << 30,
    max_cpu_seconds=300,
    tmp_size=256 << 20,
)
# The unprivileged host uid the sandbox runs as when we are root ("nobody" on Debian/Ubuntu).
_NOBODY = 65534


def command_problem(command: object) -> str | None:
    """Why ``command`` cannot run at all (not a string, empty, too long), or ``None``."""
    if not command or not isinstance(command, str):
        return "Error: command must be a non-empty string."
    if "\x00" in command:
        return "Error: command contains a NUL byte."
    size = len(command.encode("utf-8", errors="surrogatepass"))
    if size > MAX_COMMAND_BYTES:
        return (
            f"Error: command is {size} bytes, over the limit of {MAX_COMMAND_BYTES} bytes; "
            "write long scripts to a file in the workspace and run the file."
        )
    return None


def run_limited(
    argv: Sequence[str],
    *,
    cwd: str | Path,
    env: Mapping[str, str],
    timeout: float,
    max_output_bytes: int,
) -> ExecuteResponse:
    """Run ``argv`` in its own process group with a time limit and an output limit.

    stdout and stderr are merged. On timeout the whole process group is killed (``SIGKILL``); for a
    ``bwrap`` command that also ends its PID namespace (``--die-with-parent``), so every process the
    command started dies, even one that left the group with ``setsid``. The result then has exit
    code 124. Output past ``max_output_bytes`` is cut and ``truncated=True``.

    Args:
        argv: the program and its arguments.
        cwd: working directory.
        env: the complete environment of the process.
        timeout: seconds before the process group is killed.
        max_output_bytes: how much output is kept.

    Returns:
        The deepagents ``ExecuteResponse``.
    """
    try:
        process = subprocess.Popen(
            list(argv),
            cwd=str(cwd),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as error:
        return ExecuteResponse(output=f"Error: the command could not start ({error.strerror}).", exit_code=126)
    with process:
        try:
            raw, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            try:
                process.communicate(timeout=2)
            except subprocess.TimeoutExpired:
                # Without a PID namespace (lexical mode) a process that left the group may hold the pipe.
                process.kill()
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


class _PathRefusedError(OSError):
    """A file-tool path that is invalid or leaves the workspace (the message names no host path)."""


class WorkspaceFiles(FilesystemBackend):
    """``FilesystemBackend`` (``virtual_mode=True``) whose bad paths are tool errors, never exceptions.

    deepagents raises ``ValueError`` (with the host path in it) for a path that leaves the root
    through a symlink, and Python for a path with a NUL byte; some operations (``delete``) do not
    catch it, so the run would end. Here both become an ``OSError`` every operation reports as its
    error result, with the agent's own path only.
    """

    def __init__(self, root_dir: str | Path) -> None:
        super().__init__(root_dir=root_dir, virtual_mode=True)

    def _resolve_path(self, key: str) -> Path:
        if "\x00" in key:
            raise _PathRefusedError("the path contains a NUL byte")
        try:
            return super()._resolve_path(key)
        except ValueError:
            raise _PathRefusedError("the path is outside the workspace") from None


class BwrapSandboxBackend(WorkspaceFiles, SandboxBackendProtocol):
    """An isolated sandbox: each command runs in a fresh bubblewrap (``bwrap``) container.

    What the command sees: ``/usr`` (and ``/lib``, ``/bin``, ... as on the host) read-only, a few
    loader/TLS files from ``/etc`` read-only (no ``passwd``), its own ``/proc`` (own PID namespace),
    ``/dev`` and a size-limited private ``/tmp``, and ``root_dir`` mounted read-write at ``mount``
    (``/workspace``, its working directory); the rest of the root is empty and read-only. No
    network (only loopback), own IPC/UTS namespaces, no capabilities; ``--die-with-parent`` and
    ``--new-session`` stop it outliving us or reaching our terminal. The environment is just
    ``PATH``, ``HOME=/workspace`` and ``LANG``. At the time limit the whole process tree is killed.

    It runs as an unprivileged uid: with a user namespace it is uid ``65534`` inside and our own
    uid outside; when we are root, ``bwrap`` runs without a user namespace and switches to host
    uid ``65534`` (``nobody``) with ``setpriv``, so what it creates belongs to ``nobody`` and a
    setuid bit it sets gives no one more rights. For that, ``root_dir`` and the files the file
    tools write are handed to uid ``65534`` (``chown``).

    Limits per command, each a keyword with a safe default (``None`` lifts it): ``max_processes``
    (128), ``max_file_size`` (1 GiB per file), ``max_memory`` (4 GiB address space per process),
    ``max_cpu_seconds`` (300 per process), ``tmp_size`` (256 MiB of ``/tmp``).

    File tools work on ``root_dir`` directly (``/x.txt`` is ``<root_dir>/x.txt``; ``..``, ``~``,
    NUL bytes and symlinks leaving ``root_dir`` are refused with an error result).

    Args:
        root_dir: the host directory that becomes ``/workspace``; created if missing.
        timeout: seconds per command; the most a model-supplied ``timeout`` can ask for.
        max_output_bytes: output kept per command.
        bwrap: path of the ``bwrap`` binary (default: found on ``PATH``).
        mount: where ``root_dir`` appears inside the sandbox.
        **limits: the `Limits` above.

    Raises:
        UserError: ``bwrap`` is not installed or cannot run here, or a bad timeout or limit.
    """

    def __init__(
        self,
        root_dir: str | Path,
        *,
        timeout: float = 120,
        max_output_bytes: int = 100_000,
        bwrap: str | None = None,
        mount: str = "/workspace",
        **limits: Any,
    ) -> None:
        """Create the sandbox over ``root_dir`` (see the class docstring)."""
        binary = find_bwrap(bwrap)
        if timeout <= 0:
            msg = f"timeout must be positive, got {timeout!r}; pass seconds, e.g. timeout=120."
            raise UserError(msg)
        unknown = sorted(set(limits) - set(Limits.__annotations__))
        if unknown:
            msg = f"unknown sandbox option(s) {unknown}; pass one of {sorted(Limits.__annotations__)}."
            raise UserError(msg)
        chosen = Limits(**{**_DEFAULT_LIMITS, **limits})  # type: ignore[typeddict-item]
        check_limits(chosen)
        self._switch_uid = _NOBODY if os.geteuid() == 0 else None
        needed = [*(["/usr/bin/setpriv"] if self._switch_uid is not None else []), "/usr/bin/prlimit"]
        missing = [tool for tool in needed if not os.access(tool, os.X_OK)]
        if missing:
            msg = f"the sandbox needs {', '.join(missing)}; install util-linux (`apt-get install util-linux`)."
            raise UserError(msg)
        probe_bwrap(binary, switch_uid=self._switch_uid)
        root = Path(root_dir).resolve()
        root.mkdir(parents=True, exist_ok=True)
        super().__init__(root)
        self._timeout = timeout
        self._max_output_bytes = max_output_bytes
        self._mount = mount
        self.limits = chosen
        self._command = BwrapCommand(
            binary=binary, workspace=root, mount=mount, uid=_NOBODY, switch_uid=self._switch_uid, limits=chosen
        )
        self._id = f"bwrap-{uuid.uuid4().hex[:8]}"
        self._hand_over(root, walk=True)

    @property
    def id(self) -> str:
        """Unique id of this sandbox instance."""
        return self._id

    def _hand_over(self, path: Path, *, walk: bool = False) -> None:
        """As root, give ``path`` (its folders up to ``root_dir``, or with ``walk`` all below it) to the sandbox uid."""
        uid = self._switch_uid
        if uid is None:
            return
        paths = [path]
        if walk:
            paths += [Path(folder) / name for folder, dirs, files in os.walk(path) for name in (*dirs, *files)]
        else:
            paths += [parent for parent in path.parents if parent.is_relative_to(self.cwd)]
        for item in paths:
            try:
                if os.lstat(item).st_uid != uid:
                    os.lchown(item, uid, uid)
            except OSError:  # pragma: no cover - removed meanwhile
                continue

    def write(self, file_path: str, content: str) -> WriteResult:
        """Write a new file (handed to the sandbox uid when we are root)."""
        result = super().write(file_path, content)
        if result.error is None:
            self._hand_over(self._resolve_path(file_path))
        return result

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Upload files (handed to the sandbox uid when we are root)."""
        results = super().upload_files(files)
        for result in results:
            if result.error is None:
                self._hand_over(self._resolve_path(result.path))
        return results

    def command_argv(self, command: str) -> list[str]:
        """The full ``bwrap`` command line that runs ``command`` (useful for audits).

        Args:
            command: the shell command.

        Returns:
            The argv list.
        """
        return self._command.argv(command)

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Run ``command`` with ``sh -c`` inside the sandbox.

        Args:
            command: the shell command (at most 64 KiB).
            timeout: seconds for this command; it can only lower the backend's ``timeout``.

        Returns:
            Merged output, exit code and whether the output was truncated.
        """
        return self.run(command, timeout)

    def run(
        self, command: str, timeout: float | None, *, hidden: tuple[Path, ...] = (), read_only: tuple[Path, ...] = ()
    ) -> ExecuteResponse:
        """`execute` with workspace paths to hide (``hidden``) or mount read-only (``read_only``).

        Args:
            command: the shell command (at most 64 KiB).
            timeout: seconds for this command; it can only lower the backend's ``timeout``.
            hidden: host paths inside ``root_dir`` the command must not read.
            read_only: host paths inside ``root_dir`` the command must not change.

        Returns:
            Merged output, exit code and whether the output was truncated.
        """
        if problem := command_problem(command):
            return ExecuteResponse(output=problem, exit_code=1, truncated=False)
        limit = effective_timeout(self._timeout, timeout)
        env = {"PATH": _SANDBOX_PATH, "HOME": self._mount, "LANG": "C.UTF-8"}
        argv = dataclasses.replace(self._command, hidden=hidden, read_only=read_only).argv(command)
        return run_limited(argv, cwd=self.cwd, env=env, timeout=limit, max_output_bytes=self._max_output_bytes)


def effective_timeout(maximum: float, requested: object) -> float:
    """The backend's ``maximum`` unless the model asked for less (a positive number)."""
    if requested is None or isinstance(requested, bool) or not isinstance(requested, (int, float)) or requested <= 0:
        return maximum
    return min(maximum, float(requested))
