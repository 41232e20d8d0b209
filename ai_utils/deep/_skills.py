"""``DeepAgent(skills=[...])``: entries that are ``SKILL.md`` files, skill folders or folders of skills, none missing.

deepagents loads skills from *sources*, folders holding ``<skill>/SKILL.md`` folders, and logs a source it cannot
read. The seed passes a skill's own ``SKILL.md`` path instead. So each entry is read as one of:

- ``.../<skill>/SKILL.md`` or a folder holding ``SKILL.md`` itself: that one skill (its folder is loaded);
- any other folder: every ``<skill>/SKILL.md`` folder in it (deepagents' own form).

`Skills` takes deepagents' ``SkillsMiddleware`` slot (by name) with the sources these entries need, keeps only the
skills they name, and raises `UserError` for an entry that gives no skill: at construction when the backend can be
read then (a filesystem, workspace or shell backend), else when the first run loads the skills (files in the
thread's state). The general-purpose subagent deepagents adds reads the same sources without the narrowing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from langchain_core.runnables import RunnableConfig

from ai_utils.deep._deepagents import SkillsMiddleware, StateBackend
from ai_utils.exceptions import UserError

__all__ = ["Skills", "skills_middleware"]

SKILL_FILE = "SKILL.md"


@dataclass(frozen=True, slots=True)
class _Entry:
    given: str  # as the caller wrote it, for messages
    folder: str  # the skill's folder (single) or the folder of skill folders
    single: bool


def _folder(path: str) -> str:
    return str(PurePosixPath(path.replace("\\", "/")))


def _entries(skills: Any, backend: Any) -> list[_Entry]:
    if isinstance(skills, str) or not isinstance(skills, Sequence):
        raise UserError(
            f"`skills` must be a list of paths on the backend, got {skills!r}. "
            "E.g. skills=['/skills/refactor/SKILL.md'] or skills=['/skills/']."
        )
    entries = []
    for given in skills:
        if not isinstance(given, str) or not given.strip():
            raise UserError(f"Each `skills` entry must be a path on the backend, got {given!r}.")
        path = PurePosixPath(_folder(given))
        if path.name == SKILL_FILE:
            entries.append(_Entry(given, str(path.parent), True))
        else:
            entries.append(_Entry(given, str(path), _holds_skill_file(backend, str(path))))
    return entries


def _holds_skill_file(backend: Any, folder: str) -> bool:
    """A folder with ``SKILL.md`` right in it is one skill; unknown (state-backed files) counts as a source."""
    try:
        (response,) = backend.download_files([f"{folder.rstrip('/')}/{SKILL_FILE}"])
    except RuntimeError:  # StateBackend: its files exist only inside a run
        return False
    return response.error is None and response.content is not None


class Skills(SkillsMiddleware):
    """deepagents' `SkillsMiddleware`, narrowed to the skills the entries name; an entry without one fails."""

    def __init__(self, *, backend: Any, entries: list[_Entry]) -> None:
        sources = [str(PurePosixPath(e.folder).parent) if e.single else e.folder for e in entries]
        super().__init__(backend=backend, sources=list(dict.fromkeys(sources)))
        self._entries = entries

    @property
    def name(self) -> str:
        """The name of deepagents' skills slot, which this middleware takes."""
        return "SkillsMiddleware"

    def _narrowed(self, update: Any) -> Any:
        """Only the named skills; `UserError` for an entry that yields none."""
        if not isinstance(update, Mapping):
            return update  # already loaded for this thread
        loaded = list(update.get("skills_metadata") or [])
        kept = []
        found: set[_Entry] = set()
        for skill in loaded:
            folder = PurePosixPath(_folder(str(skill["path"]))).parent
            for entry in self._entries:
                if str(folder if entry.single else folder.parent) == entry.folder:
                    found.add(entry)
                    kept.append(skill)
                    break
        missing = [e.given for e in self._entries if e not in found]
        if missing:
            raise UserError(
                f"DeepAgent(skills=...): no skill found at {missing!r} on the backend. Each entry is a skill's "
                "`SKILL.md` (with `name` and `description` front matter), its folder, or a folder of such skill "
                "folders; check the path is relative to the backend's root."
            )
        return {**update, "skills_metadata": kept}

    def before_agent(self, state: Any, runtime: Any, config: RunnableConfig) -> Any:  # type: ignore[override]
        """Load the skills (deepagents), keep the named ones."""
        return self._narrowed(super().before_agent(state, runtime, config))

    async def abefore_agent(self, state: Any, runtime: Any, config: RunnableConfig) -> Any:  # type: ignore[override]
        """Async twin of `before_agent`."""
        return self._narrowed(await super().abefore_agent(state, runtime, config))

    def check_now(self) -> None:
        """Load once at construction when the backend can be read outside a run, so a missing entry fails early."""
        try:
            self.before_agent({}, None, {})
        except RuntimeError:  # StateBackend (or a composite's state route): checked when the first run loads them
            return


def skills_middleware(skills: Any, backend: Any) -> Skills:
    """The skills slot for ``DeepAgent(skills=...)``, checked now where the backend allows it.

    Args:
        skills: the entries (``SKILL.md`` paths or folders on the backend).
        backend: the agent's backend (deepagents' default `StateBackend` when ``None``).

    Returns:
        The middleware.

    Raises:
        UserError: not a list of paths, or an entry that gives no skill.
    """
    if backend is None:
        backend = StateBackend()
    middleware = Skills(backend=backend, entries=_entries(skills, backend))
    middleware.check_now()
    return middleware
