"""`SaverWrapper`: a checkpoint saver that hands every call to another saver (``inner``).

A subclass overrides the few methods it changes (`SmartCheckpointSaver`: the writes); the rest are
`delegated` from LangGraph's own method templates, sync and async. Optional methods the inner saver
lacks (``delete_for_runs``, ``copy_thread``, ``prune`` and their async twins) stay unclaimed: LangGraph's
conformance suite detects capabilities by override, so each instance gets a class without them.
"""

from __future__ import annotations

import builtins
import copy
from collections.abc import Collection
from typing import Any, ClassVar, Self

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol

from ai_utils.memory._methods import delegated

__all__ = ["SaverWrapper"]

_OPTIONAL = ("delete_for_runs", "adelete_for_runs", "copy_thread", "acopy_thread", "prune", "aprune")


class SaverWrapper(BaseCheckpointSaver[Any]):
    """Delegates every saver method to ``inner``; ``serde`` and ``config_specs`` are the inner saver's.

    A subclass that sets ``_variants = {}`` in its own body gets, per set of optional methods ``inner``
    lacks, a cached subclass that leaves those to `BaseCheckpointSaver` (``copy.copy()`` keeps the class).
    """

    _variants: ClassVar[dict[frozenset[str], type[Any]] | None] = None
    _inner: BaseCheckpointSaver[Any]

    def __new__(cls, inner: Any = None, *args: Any, **kwargs: Any) -> Self:
        variants = cls.__dict__.get("_variants")
        if inner is None or variants is None:  # copy.copy() passes no arguments; variants make no variants
            return super().__new__(cls)
        missing = frozenset(
            name for name in _OPTIONAL if getattr(type(inner), name, None) is getattr(BaseCheckpointSaver, name)
        )
        if not missing:
            return super().__new__(cls)
        variant = variants.get(missing)
        if variant is None:
            body = {name: getattr(BaseCheckpointSaver, name) for name in missing}
            variant = variants.setdefault(missing, type(cls.__name__, (cls,), {**body, "__module__": cls.__module__}))
        return super().__new__(variant)  # type: ignore[no-any-return]

    @property
    def inner(self) -> BaseCheckpointSaver[Any]:
        """The wrapped saver (e.g. to call its ``setup()``)."""
        return self._inner

    @property
    def run_locks(self) -> Any:
        """The inner saver's cross-process run locks, if it has them (``sqlite_saver``, ``postgres_saver``)."""
        return getattr(self._inner, "run_locks", None)

    @property
    def serde(self) -> SerializerProtocol:
        """The inner saver's serializer."""
        return self._inner.serde

    @serde.setter
    def serde(self, value: SerializerProtocol) -> None:
        self._inner.serde = value

    @property
    def config_specs(self) -> builtins.list[Any]:
        """The inner saver's configuration specs."""
        return self._inner.config_specs

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> Self:
        """A clone over ``inner.with_allowlist(...)`` that shares everything else with this wrapper."""
        inner = self._inner.with_allowlist(extra_allowlist)
        if inner is self._inner:
            return self
        clone = copy.copy(self)
        clone._inner = inner
        return clone

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The inner saver's next channel version."""
        return self._inner.get_next_version(current, channel)

    get_tuple = delegated(BaseCheckpointSaver.get_tuple)
    aget_tuple = delegated(BaseCheckpointSaver.aget_tuple)
    list = delegated(BaseCheckpointSaver.list)
    alist = delegated(BaseCheckpointSaver.alist)
    get_delta_channel_history = delegated(BaseCheckpointSaver.get_delta_channel_history)
    aget_delta_channel_history = delegated(BaseCheckpointSaver.aget_delta_channel_history)
    put = delegated(BaseCheckpointSaver.put)
    aput = delegated(BaseCheckpointSaver.aput)
    put_writes = delegated(BaseCheckpointSaver.put_writes)
    aput_writes = delegated(BaseCheckpointSaver.aput_writes)
    delete_thread = delegated(BaseCheckpointSaver.delete_thread)
    adelete_thread = delegated(BaseCheckpointSaver.adelete_thread)
    delete_for_runs = delegated(BaseCheckpointSaver.delete_for_runs)
    adelete_for_runs = delegated(BaseCheckpointSaver.adelete_for_runs)
    copy_thread = delegated(BaseCheckpointSaver.copy_thread)
    acopy_thread = delegated(BaseCheckpointSaver.acopy_thread)
    prune = delegated(BaseCheckpointSaver.prune)
    aprune = delegated(BaseCheckpointSaver.aprune)
