"""The one PEP 562 lazy-export helper every ``ai_utils`` package ``__init__`` uses.

A package lists ``name -> module`` (or ``name -> (module, attribute)``) and gets back the module-level
``__getattr__`` / ``__dir__`` pair: a name's module is imported on first access and the value is cached
in the package namespace, so ``import ai_utils`` stays free of LangChain and optional extras.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

LazyTable = Mapping[str, str] | Mapping[str, tuple[str, str]]


def lazy_exports(
    package: str, table: LazyTable, namespace: dict[str, Any], exported: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build ``(__getattr__, __dir__)`` for ``package`` from its lazy ``table``.

    ``namespace`` is the package's ``globals()`` (a loaded value is cached there); ``exported`` is its
    ``__all__``, which ``dir()`` lists.
    """
    names = sorted(exported)

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = (target, name) if isinstance(target, str) else target
        value = getattr(importlib.import_module(module), attribute)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__
