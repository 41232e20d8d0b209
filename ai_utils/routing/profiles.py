"""`ModelProfiles` (seed: polpo-core "Model profiles"): stable role names for models, with ordered fallbacks.

A plain string is always a concrete model id; a profile is selected only with ``{"profile": name}``.
Resolution is recursive, deterministic (same input, same list), deduplicates concrete models keeping the first
occurrence, caches every profile's expansion, and fails closed with `ModelProfileError` for an unknown profile,
a cycle, nesting deeper than 8 profiles, more than 16 models, or a root profile outside the allowlist. Nested
profiles inherit the grant of the root that was selected; selecting a nested one directly needs its own grant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from typing_extensions import TypedDict

from ai_utils.exceptions import ModelProfileError, UserError

__all__ = ["MAX_PROFILE_DEPTH", "MAX_PROFILE_MODELS", "ModelProfiles", "ProfileRef", "as_profiles"]

MAX_PROFILE_DEPTH: Final = 8
"""At most this many profiles nested in one another (the selected one counts)."""
MAX_PROFILE_MODELS: Final = 16
"""At most this many concrete models (after deduplication) for one profile."""

_KEYS: Final = frozenset({"primary", "fallbacks", "hint"})


class ProfileRef(TypedDict):
    """Selects a profile by name (a plain string is a concrete model id)."""

    profile: str


def _ref(value: Any) -> str | None:
    """The profile name of ``{"profile": name}``; ``None`` for anything else."""
    if isinstance(value, Mapping) and set(value) == {"profile"} and isinstance(value["profile"], str):
        return value["profile"]
    return None


class ModelProfiles:
    """Named model profiles with fallbacks: ``resolve({"profile": "balanced"})`` → concrete model ids in order.

    Example:
        ```python
        profiles = ModelProfiles({
            "fast": "openai/gpt-4o-mini",
            "balanced": {"primary": "anthropic/claude-sonnet-4", "fallbacks": [{"profile": "fast"}, "openai/gpt-5"],
                         "hint": "Requests that need stronger reasoning."},
        })
        profiles.resolve({"profile": "balanced"})  # ["anthropic/claude-sonnet-4", "openai/gpt-4o-mini", "openai/gpt-5"]
        llm = get_llm(profile="balanced", profiles=profiles)   # falls back on 429 / 5xx / timeouts
        ```

    Args:
        profiles: name → a concrete model id, ``{"profile": other}`` (an alias), or
            ``{"primary": id | {"profile": ...}, "fallbacks": [id | {"profile": ...}, ...], "hint": str}``.
        allowed: the root profiles that may be selected (``None``: all); nested profiles come along.
        hints: name → a short description of what the profile is for (used by `resolve_model_route`'s classifier;
            a definition's own ``"hint"`` wins).

    Raises:
        UserError: ``profiles`` is not a mapping of names.
    """

    def __init__(
        self,
        profiles: Mapping[str, Any],
        *,
        allowed: Sequence[str] | None = None,
        hints: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(profiles, Mapping):
            raise UserError(f"ModelProfiles needs a mapping of profile name -> definition, got {profiles!r}.")
        for name in profiles:
            if not isinstance(name, str) or not name:
                raise UserError(f"Profile names must be non-empty strs, got {name!r}.")
        self._definitions: dict[str, Any] = dict(profiles)
        self.allowed: tuple[str, ...] | None = None if allowed is None else self._allowlist(allowed)
        merged = dict(hints or {})
        for name, definition in self._definitions.items():
            if isinstance(definition, Mapping) and isinstance(definition.get("hint"), str):
                merged[name] = definition["hint"]
        self._hints = merged
        # name -> (concrete models, height: profiles on the longest nesting path starting at it)
        self._expanded: dict[str, tuple[tuple[str, ...], int]] = {}
        self._resolved: dict[tuple[str, tuple[str, ...] | None], tuple[str, ...]] = {}
        self._grants: dict[tuple[str, ...], tuple[str, ...]] = {}

    @property
    def names(self) -> list[str]:
        """Every profile name, in definition order."""
        return list(self._definitions)

    def hint(self, name: str) -> str | None:
        """The profile's hint, if it has one."""
        return self._hints.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._definitions

    def __repr__(self) -> str:
        return f"ModelProfiles({self.names!r}, allowed={self.allowed!r})"

    # -- resolution ---------------------------------------------------------------------------------------

    def _allowlist(self, allowed: Iterable[str]) -> tuple[str, ...]:
        if isinstance(allowed, str) or not isinstance(allowed, Iterable):
            raise UserError(f"`allowed` must be a list of profile names, got {allowed!r}.")
        names = tuple(allowed)
        for name in names:
            if name not in self._definitions:
                raise ModelProfileError(
                    f"The allowlist names the unknown profile {name!r}; known profiles: {self.names!r}. "
                    "Fix the name or define the profile.",
                    profile=str(name),
                )
        return names

    def resolve(self, selection: str | Mapping[str, Any], *, allowed: Sequence[str] | None = None) -> list[str]:
        """The concrete model ids of ``selection``: primary first, then the fallbacks in order, deduplicated.

        Args:
            selection: ``{"profile": name}``, or a plain string (a concrete model id, returned as ``[id]``).
            allowed: narrows the selectable root profiles for this call (default: the constructor's ``allowed``).

        Returns:
            1 to 16 concrete model ids.

        Raises:
            ModelProfileError: an unknown profile, a cycle, nesting deeper than 8, more than 16 models, or a root
                profile outside the allowlist; ``.profile`` names it.
            UserError: ``selection`` is neither a model id nor ``{"profile": name}``.
        """
        if isinstance(selection, str):
            if not selection.strip():
                raise UserError("A model id must be a non-empty str.")
            return [selection]
        root = _ref(selection)
        if root is None:
            raise UserError(
                f"Select a profile with {{'profile': name}} or pass a concrete model id str, got {selection!r}."
            )
        return self._models(root, self._grant(allowed))

    def _grant(self, allowed: Sequence[str] | None) -> tuple[str, ...] | None:
        """The effective allowlist: the constructor's, narrowed by ``allowed`` (checked once per distinct list)."""
        if allowed is None:
            return self.allowed
        key = tuple(allowed) if isinstance(allowed, (list, tuple)) else None
        grant = self._grants.get(key) if key is not None else None
        if grant is None:
            narrowed = self._allowlist(allowed)
            # A call can only narrow the constructor's grant, never widen it.
            grant = narrowed if self.allowed is None else tuple(n for n in narrowed if n in self.allowed)
            if key is not None:
                self._grants[key] = grant
        return grant

    def _models(self, root: str, grant: tuple[str, ...] | None) -> list[str]:
        key = (root, grant)
        cached = self._resolved.get(key)
        if cached is None:
            if grant is not None and root not in grant:
                raise ModelProfileError(
                    f"Profile {root!r} is not in the allowlist {list(grant)!r}. Select an allowed profile "
                    "or add it to `allowed`.",
                    profile=root,
                )
            cached = self._resolved[key] = self._expand(root, [])[0]
        return list(cached)

    def _parts(self, name: str) -> list[Any]:
        definition = self._definitions[name]
        if isinstance(definition, str):
            if not definition.strip():
                raise ModelProfileError(f"Profile {name!r} is an empty model id.", profile=name)
            return [definition]
        if _ref(definition) is not None:
            return [definition]
        if not isinstance(definition, Mapping) or "primary" not in definition or set(definition) - _KEYS:
            raise ModelProfileError(
                f"Profile {name!r} has the definition {definition!r}. Use a model id str, {{'profile': other}}, or "
                "{'primary': ..., 'fallbacks': [...]}.",
                profile=name,
            )
        fallbacks = definition.get("fallbacks", ())
        if isinstance(fallbacks, (str, Mapping)) or not isinstance(fallbacks, Iterable):
            raise ModelProfileError(f"Profile {name!r}: `fallbacks` must be a list, got {fallbacks!r}.", profile=name)
        return [definition["primary"], *fallbacks]

    def _expand(self, name: str, path: list[str]) -> tuple[tuple[str, ...], int]:
        done = self._expanded.get(name)
        if done is None:
            done = self._expanded[name] = self._expand_new(name, path)
        if len(path) + done[1] > MAX_PROFILE_DEPTH:
            chain = " -> ".join([*path, name])
            raise ModelProfileError(
                f"Profile {name!r} nests too deep ({chain} -> ...): at most {MAX_PROFILE_DEPTH} profiles may be "
                "nested. Point to concrete model ids sooner.",
                profile=name,
            )
        return done

    def _expand_new(self, name: str, path: list[str]) -> tuple[tuple[str, ...], int]:
        if name not in self._definitions:
            where = f" (referenced by {path[-1]!r})" if path else ""
            raise ModelProfileError(
                f"Unknown model profile {name!r}{where}; known profiles: {self.names!r}.", profile=name
            )
        if name in path:
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise ModelProfileError(f"Model profiles form a cycle: {cycle}. Break it.", profile=name)
        if len(path) + 1 > MAX_PROFILE_DEPTH:
            raise ModelProfileError(
                f"Profile {name!r} nests too deep ({' -> '.join([*path, name])}): at most {MAX_PROFILE_DEPTH} "
                "profiles may be nested. Point to concrete model ids sooner.",
                profile=name,
            )
        path.append(name)
        models: dict[str, None] = {}
        height = 1
        try:
            for part in self._parts(name):
                if isinstance(part, str) and part.strip():
                    models.setdefault(part, None)
                    continue
                nested = _ref(part)
                if nested is None:
                    raise ModelProfileError(
                        f"Profile {name!r} holds {part!r}; use a model id str or {{'profile': name}}.", profile=name
                    )
                sub, sub_height = self._expand(nested, path)
                height = max(height, sub_height + 1)
                for model in sub:
                    models.setdefault(model, None)
        finally:
            path.pop()
        if len(models) > MAX_PROFILE_MODELS:
            raise ModelProfileError(
                f"Profile {name!r} resolves to {len(models)} models; at most {MAX_PROFILE_MODELS} are allowed. "
                "Drop some fallbacks.",
                profile=name,
            )
        return tuple(models), height


def as_profiles(profiles: ModelProfiles | Mapping[str, Any]) -> ModelProfiles:
    """``profiles`` as `ModelProfiles` (a plain mapping is wrapped)."""
    return profiles if isinstance(profiles, ModelProfiles) else ModelProfiles(profiles)
