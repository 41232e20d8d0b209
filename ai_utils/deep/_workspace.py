"""The workspace composite: its default backend, which keeps the agent inside the route, and the shells.

Every workspace backend is a deepagents ``CompositeBackend`` whose one route (``/workspace/``) goes to the
files on disk and whose default answers for every other path. `RouteOnlyState` refuses those paths with an
error result the model reads, except deepagents' own internal paths (evicted tool results, offloaded
history), which stay in graph state. `SandboxShell` and `HostShell` add ``execute`` through a runner that
`ai_utils.deep.backends` builds (bubblewrap sandbox or confined host shell): the composite sends
``execute`` to its default, so this is where every command enters.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ai_utils._optional import missing_extra
from ai_utils.deep._sandbox import command_problem

try:
    from deepagents.backends import CompositeBackend, LocalShellBackend, StateBackend
    from deepagents.backends.protocol import (
        BackendProtocol,
        DeleteResult,
        EditResult,
        ExecuteResponse,
        FileDownloadResponse,
        FileUploadResponse,
        GlobResult,
        GrepResult,
        LsResult,
        ReadResult,
        SandboxBackendProtocol,
        WriteResult,
    )
except ImportError as _import_error:
    raise missing_extra("deepagents", extra="deep", feature="the DeepAgent backends") from _import_error

if TYPE_CHECKING:
    from collections.abc import Sequence

    from deepagents.middleware.filesystem import FilesystemPermission

    from ai_utils.deep.backends import Runner

__all__ = ["HostShell", "RouteOnlyState", "SandboxShell", "workspace_composite", "workspace_shell"]

# deepagents keeps evicted large tool results and offloaded history here; they stay in graph state.
_INTERNAL_PREFIXES = ("/large_tool_results/", "/conversation_history/")


def workspace_composite(default: RouteOnlyState, files: BackendProtocol) -> CompositeBackend:
    """The composite that sends ``default.route`` to ``files`` and everything else (and ``execute``) to ``default``."""
    return CompositeBackend(default=default, routes={default.route: files})


def workspace_shell(backend: object) -> HostShell | SandboxShell | None:
    """The shell behind a composite built here, or None for any other backend."""
    shell = backend.default if isinstance(backend, CompositeBackend) else None
    return shell if isinstance(shell, (HostShell, SandboxShell)) else None


class RouteOnlyState(StateBackend):
    """Graph-state backend that refuses every path outside the workspace route.

    Only deepagents' own internal paths (evicted tool results) are stored, in graph state.
    """

    def __init__(self, route: str) -> None:
        super().__init__()
        self._route = route

    @property
    def route(self) -> str:
        """The workspace prefix."""
        return self._route

    def _refusal(self, path: str | None) -> str | None:
        if path is not None and path.startswith(_INTERNAL_PREFIXES):
            return None
        return f"{path!r} is outside the workspace; only paths under {self._route} are accessible."

    def _error(self, path: str | None) -> str | None:
        # deepagents writes "Error: <error>" for ls/read_file/glob, but shows write/edit/delete/grep errors as is.
        refusal = self._refusal(path)
        return None if refusal is None else f"Error: {refusal}"

    def ls(self, path: str) -> LsResult:
        if path == "/":
            return LsResult(entries=[])
        error = self._refusal(path)
        return super().ls(path) if error is None else LsResult(error=error)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        error = self._refusal(file_path)
        return super().read(file_path, offset, limit) if error is None else ReadResult(error=error)

    def write(self, file_path: str, content: str) -> WriteResult:
        error = self._error(file_path)
        return super().write(file_path, content) if error is None else WriteResult(error=error)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        error = self._error(file_path)
        return (
            super().edit(file_path, old_string, new_string, replace_all) if error is None else EditResult(error=error)
        )

    def delete(self, file_path: str) -> DeleteResult:
        error = self._error(file_path)
        return super().delete(file_path) if error is None else DeleteResult(error=error)

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
        context_lines: int = 0,
    ) -> GrepResult:
        if path in (None, "/"):
            return GrepResult(matches=[])
        error = self._error(path)
        return super().grep(pattern, path, glob, max_count=max_count) if error is None else GrepResult(error=error)

    async def agrep(self, *args: Any, **kwargs: Any) -> GrepResult:
        """Run our `grep` (with its refusals) in a thread, as the protocol's default does.

        FilesystemBackend's own ``agrep``, which the host shell would otherwise inherit, would search the disk.
        """
        return await BackendProtocol.agrep(self, *args, **kwargs)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        if path in (None, "/"):
            return GlobResult(matches=[])
        error = self._refusal(path)
        return super().glob(pattern, path) if error is None else GlobResult(error=error)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        allowed = [(path, data) for path, data in files if self._refusal(path) is None]
        done = {r.path: r for r in super().upload_files(allowed)} if allowed else {}
        return [done.get(path) or FileUploadResponse(path=path, error="permission_denied") for path, _ in files]

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        allowed = [path for path in paths if self._refusal(path) is None]
        done = {r.path: r for r in super().download_files(allowed)} if allowed else {}
        return [done.get(path) or FileDownloadResponse(path=path, error="permission_denied") for path in paths]


class SandboxShell(RouteOnlyState, SandboxBackendProtocol):
    """`RouteOnlyState` plus ``execute`` through a runner (the composite sends ``execute`` to its default)."""

    def __init__(self, route: str, runner: Runner, id_prefix: str) -> None:
        super().__init__(route)
        self._runner = runner
        self._id = f"{id_prefix}-{uuid.uuid4().hex[:8]}"
        self.rule_sets: list[list[FilesystemPermission]] = []

    @property
    def id(self) -> str:
        return self._id

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        if problem := command_problem(command):
            return ExecuteResponse(output=problem, exit_code=1, truncated=False)
        return self._runner(command, timeout, self.rule_sets)


class HostShell(RouteOnlyState, LocalShellBackend):
    """`RouteOnlyState` plus the confined host shell.

    It is a ``LocalShellBackend`` so that deepagents tells the model the true path mapping
    (``/workspace/x`` is ``<root_dir>/x`` in the shell); its own ``execute`` replaces deepagents'
    unrestricted one.
    """

    def __init__(
        self,
        route: str,
        root: Path,
        runner: Runner,
        permissions: Sequence[FilesystemPermission],
    ) -> None:
        RouteOnlyState.__init__(self, route)
        LocalShellBackend.__init__(self, root_dir=root, virtual_mode=True)
        self._runner = runner
        self.rule_sets: list[list[FilesystemPermission]] = [list(permissions)]

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        if problem := command_problem(command):
            return ExecuteResponse(output=problem, exit_code=1, truncated=False)
        return self._runner(command, timeout, self.rule_sets)
