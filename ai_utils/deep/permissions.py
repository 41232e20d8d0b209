"""Filesystem permission helpers and the command policy that confines ``execute`` to the workspace.

File tools: the helpers build deepagents ``FilesystemPermission`` rules (first match wins, no match
allows). deepagents enforces them on ``ls``/``read_file``/``write_file``/``edit_file``/``glob``/
``grep``/``delete`` and checks symlink targets for disk-backed routes.

``execute``: deepagents refuses ``permissions`` together with an execute-capable backend unless
every rule path lies inside a ``CompositeBackend`` route. Our workspace backends
(`ai_utils.deep.backends`) are such composites, so rules inside the route are accepted. The shell is
confined by the OS (bubblewrap, see `ai_utils.deep.backends.create_local_shell_backend`); before
that, `CommandPolicy` checks each command lexically — a fast first filter with clear refusals, not
the guarantee.

What `CommandPolicy` refuses (lexically, before the command runs):

* absolute paths outside the workspace (``cat /etc/passwd``, ``ls /``), ``..`` path segments
  (``cd .. && ls``), ``~``, variable expansion and command substitution (``$HOME``, ``$(...)``,
  backticks), relative paths that resolve through a symlink out of ``root_dir``, ``cd``/``pushd``
  without a folder (home) or with ``-``, paths denied by the given permission rules, commands
  whose program is not in ``allow`` (when set) and commands matching a ``deny`` regex. The command
  text of ``sh -c``/``bash -c``/``eval`` is checked the same way. The check is linear in the command
  length (commands are at most 64 KiB).
* route paths (``/workspace/x``) are rewritten to the host path of ``root_dir``.
* what it cannot see: globs (``cat .?/x``), symlinks made by the command itself, options with a
  path glued on (``tar -C/etc``), programs that build paths at run time. Only OS confinement stops
  those; with ``confinement="lexical"`` they reach the host.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

from ai_utils._optional import missing_extra
from ai_utils.exceptions import UserError

try:
    from deepagents.middleware.filesystem import FilesystemPermission
    from wcmatch import glob as wcglob
except ImportError as _import_error:
    raise missing_extra("deepagents", extra="deep", feature="DeepAgent permissions") from _import_error

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CommandPolicy",
    "allow_read",
    "allow_write",
    "deny_read",
    "deny_write",
    "normalize_route",
    "workspace_permissions",
]

_Operation = Literal["read", "write"]
_GLOB_FLAGS = wcglob.BRACE | wcglob.GLOBSTAR
_EXPANSION = re.compile(r"[$`]")
_ABSOLUTE = re.compile(r"(?:^|(?<=[^\w.~*?\]}-]))/[^\s'\"()<>|;&]*")
_PARENT = re.compile(r"(?:^|[^\w.])\.\.(?:$|/)")
_SHELL_OPERATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"}
# `cd` alone goes to $HOME, `cd -` to $OLDPWD: both outside the workspace.
_CHANGE_DIR = {"cd", "pushd"}
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}


def normalize_route(route: str) -> str:
    """Check a route prefix and give it the form ``/name/``.

    Args:
        route: the prefix the agent sees, e.g. ``"/workspace/"`` or ``"/workspace"``.

    Returns:
        The route with one leading and one trailing slash.

    Raises:
        UserError: the route is ``/``, relative or contains ``..``/``~``.
    """
    stripped = route.strip("/")
    parts = PurePosixPath(stripped).parts
    if not route.startswith("/") or not stripped or ".." in parts or "~" in parts:
        msg = f"route must be an absolute folder like '/workspace/', got {route!r}; pass e.g. route='/workspace/'."
        raise UserError(msg)
    return f"/{stripped}/"


def _rule(
    operations: list[_Operation], paths: Sequence[str], mode: Literal["allow", "deny"]
) -> list[FilesystemPermission]:
    if not paths:
        msg = "pass at least one path glob, e.g. allow_read('/workspace/**')."
        raise UserError(msg)
    try:
        return [FilesystemPermission(operations=operations, paths=list(paths), mode=mode)]
    except (ValueError, NotImplementedError) as error:
        raise UserError(f"{error}; use absolute globs such as '/workspace/**'.") from error


def allow_read(*paths: str) -> list[FilesystemPermission]:
    """Rules that allow reading (``ls``, ``read_file``, ``glob``, ``grep``) the given path globs.

    Args:
        *paths: absolute globs, e.g. ``"/workspace/**"``.

    Returns:
        A one-rule list; concatenate lists, the first matching rule wins.
    """
    return _rule(["read"], paths, "allow")


def allow_write(*paths: str) -> list[FilesystemPermission]:
    """Rules that allow writing (``write_file``, ``edit_file``, ``delete``) the given path globs (as `allow_read`)."""
    return _rule(["write"], paths, "allow")


def deny_read(*paths: str) -> list[FilesystemPermission]:
    """Rules that deny reading the given path globs, also in confined ``execute`` commands (as `allow_read`)."""
    return _rule(["read"], paths, "deny")


def deny_write(*paths: str) -> list[FilesystemPermission]:
    """Rules that deny writing the given path globs, also in confined ``execute`` commands (as `allow_read`)."""
    return _rule(["write"], paths, "deny")


def workspace_permissions(route: str = "/workspace/") -> list[FilesystemPermission]:
    """Read and write inside ``route``; every rule path lies inside the route.

    Keeping every rule inside the route is what lets deepagents accept these rules together with
    an execute-capable backend. Paths outside the route are refused by our workspace backends
    themselves (they are never on the host disk), so no ``deny /**`` rule is needed. Put your own
    ``deny_*`` rules for paths inside the route *before* these (first match wins).

    Args:
        route: the workspace prefix the agent sees.

    Returns:
        The rule list for ``DeepAgent(permissions=...)``.
    """
    prefix = normalize_route(route)
    return _rule(["read", "write"], [f"{prefix}**"], "allow")


@dataclass(frozen=True)
class CommandPolicy:
    """Which shell commands the confined local shell runs.

    Args:
        allow: program names that may run (first word of each simple command, e.g. ``("ls",
            "cat", "python3")``); ``None`` allows any program.
        deny: regular expressions; a command matching any of them is refused.
        host_paths: host folders that commands may name besides the workspace (the local shell's
            ``read_only_paths`` are added).
    """

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    host_paths: tuple[str, ...] = ()

    def check(
        self,
        command: str,
        *,
        root_dir: Path,
        route: str,
        permissions: Sequence[FilesystemPermission] = (),
    ) -> str | None:
        """Return why ``command`` is refused, or ``None`` when it may run.

        Args:
            command: the shell command as the model wrote it.
            root_dir: the host workspace folder (the working directory).
            route: the workspace prefix the agent sees.
            permissions: file rules; paths they deny are refused in commands too.

        Returns:
            An error text for the model, or ``None``.
        """
        for pattern in self.deny:
            if re.search(pattern, command):
                return f"command refused by policy (matches deny pattern {pattern!r})."
        if _EXPANSION.search(command):
            return "command refused: '$' expansions and backticks are not allowed in the confined workspace shell."
        try:
            tokens = _tokens(command)
        except ValueError as error:
            return f"command refused: cannot parse it ({error})."
        for words in _simple_commands(tokens):
            if reason := self._command_problem(words, root_dir=root_dir, route=route, permissions=permissions):
                return reason
        for token in dict.fromkeys(tokens):  # each distinct token once
            if reason := _token_problem(
                token, root_dir=root_dir, route=route, permissions=permissions, host_paths=self.host_paths
            ):
                return reason
        return None

    def _command_problem(
        self, words: list[str], *, root_dir: Path, route: str, permissions: Sequence[FilesystemPermission]
    ) -> str | None:
        program, args = words[0], words[1:]
        if self.allow is not None and program not in self.allow:
            return f"command refused: program {program!r} is not allowed (allowed: {', '.join(self.allow)})."
        if program in _CHANGE_DIR and ("-" in args or all(arg.startswith("-") for arg in args)):
            return f"command refused: {program!r} without a folder leaves the workspace; name a folder inside {route}."
        # A nested shell's command text is one token here; check it as a command of its own.
        nested = args[args.index("-c") + 1 : args.index("-c") + 2] if program in _SHELLS and "-c" in args else []
        if program == "eval":
            nested = [" ".join(args)]
        for text in nested:
            if reason := self.check(text, root_dir=root_dir, route=route, permissions=permissions):
                return reason
        return None


# One piece of a shell word per match. shlex builds each token one character at a time (quadratic in
# the token length); this scanner takes whole runs, so the check stays linear in the command length.
_PIECE = re.compile(
    r"(?P<newline>\n)|(?P<space>[ \t\r\f\v]+)|(?P<punct>[();<>|&]+)|'(?P<single>[^']*)'"
    r'|"(?P<double>(?:[^"\\]|\\.)*)"|\\(?P<escaped>.)|(?P<word>[^\s();<>|&\'"\\]+)|(?P<bad>[\'"\\])',
    re.DOTALL,
)
_DOUBLE_ESCAPE = re.compile(r'\\([\\"$`\n])')


def _tokens(command: str) -> list[str]:
    """Split ``command`` into shell words and operator tokens (a newline separates commands like ``;``)."""
    tokens: list[str] = []
    parts: list[str] = []
    started = False
    position = 0
    while position < len(command):
        if not started and command.startswith("#", position):  # a comment runs to the end of the line
            end = command.find("\n", position)
            position = len(command) if end < 0 else end
            continue
        match = _PIECE.match(command, position)
        if match is None or match.lastgroup == "bad":
            raise ValueError("No closing quotation")
        position = match.end()
        kind = match.lastgroup or "word"
        if kind in ("newline", "space", "punct"):
            if started:
                tokens.append("".join(parts))
                parts, started = [], False
            if kind != "space":
                tokens.append(";" if kind == "newline" else match.group())
            continue
        started = True
        value = match.group(kind)
        parts.append(_DOUBLE_ESCAPE.sub(r"\1", value) if kind == "double" else value)
    if started:
        tokens.append("".join(parts))
    return tokens


def _simple_commands(tokens: list[str]) -> list[list[str]]:
    """The words of each simple command (program first), without leading ``NAME=value`` assignments."""
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in _SHELL_OPERATORS:
            commands.append([])
        elif commands[-1] or "=" not in token:
            commands[-1].append(token)
    return [words for words in commands if words]


def _token_problem(
    token: str,
    *,
    root_dir: Path,
    route: str,
    permissions: Sequence[FilesystemPermission],
    host_paths: Sequence[str] = (),
) -> str | None:
    if token.startswith("~"):
        return f"command refused: {token!r} names a home directory outside the workspace."
    if _PARENT.search(token):
        return f"command refused: '..' in {token!r} leaves the workspace; stay inside {route}."
    host_root = str(root_dir)
    for match in _ABSOLUTE.findall(token):
        path = match.rstrip(".,:")
        inside_route = path == route.rstrip("/") or path.startswith(route)
        inside_host = path == host_root or path.startswith(host_root + "/")
        allowed = any(path == extra or path.startswith(extra.rstrip("/") + "/") for extra in host_paths)
        if not (inside_route or inside_host or allowed) and path not in ("/dev/null",):
            return f"command refused: {path!r} is outside the workspace {route}; use paths inside it."
    virtual = _virtual_path(token, root_dir=root_dir, route=route)
    if virtual is None:
        return None
    host = os.path.join(root_dir, virtual[len(route) :])
    if virtual != route and os.path.lexists(host):
        real = Path(os.path.realpath(host))
        if not real.is_relative_to(root_dir):
            return f"command refused: {token!r} resolves to {str(real)!r}, outside the workspace {route}."
    for rule in permissions:
        if rule.mode == "deny" and any(wcglob.globmatch(virtual, p, flags=_GLOB_FLAGS) for p in rule.paths):
            return f"command refused: permission denied for {virtual} ({'/'.join(rule.operations)})."
    return None


def _virtual_path(token: str, *, root_dir: Path, route: str) -> str | None:
    """The path as the agent sees it (``/workspace/x``) for a path-like token, else ``None``."""
    if token in _SHELL_OPERATORS or token.startswith("-") or not token or "://" in token:
        return None
    host_root = str(root_dir)
    if token.startswith(route) or token == route.rstrip("/"):
        relative = token[len(route) :]
    elif token == host_root or token.startswith(host_root + "/"):
        relative = token[len(host_root) + 1 :]
    elif token.startswith("/"):
        return None
    else:
        relative = token
    relative = str(PurePosixPath(relative)) if relative else ""
    return route + ("" if relative in ("", ".") else relative)


def to_host_command(command: str, *, root_dir: Path, route: str) -> str:
    """Rewrite route paths (``/workspace/x``) in ``command`` to the host folder (``<root_dir>/x``).

    Args:
        command: a command that passed `CommandPolicy.check`.
        root_dir: the host workspace folder.
        route: the workspace prefix.

    Returns:
        The command to run on the host.
    """
    bare = re.escape(route.rstrip("/"))
    return re.sub(rf"(?<![\w.~/-]){bare}(?=/|\b|$)", str(root_dir).replace("\\", "\\\\"), command)
