"""CEL for ``when(...)`` transitions: the one module that imports the CEL library.

We use ``common-expression-language`` (import name ``cel``, Python bindings of the Rust ``cel`` crate)
rather than ``cel-python`` (``celpy``, pure Python). Measured on Python 3.11 here, both install from
wheels; for ``triage.needs_refund == true && request.amount < 100`` a compiled program evaluates in
about 6 µs with ``cel`` against about 150 µs with ``celpy`` (plus its JSON-to-CEL conversion per
call), and ``cel`` compares ints with doubles (``request.amount > 10.5``) where ``celpy`` raises "no
matching overload" on JSON numbers. Both are real CEL parsers and evaluators: an expression is data,
parsed into CEL's grammar, with no access to Python names, attributes or builtins. ``cel``'s
``__init__`` also imports its CLI (typer, rich, prompt-toolkit; ~130 ms once), which is why this
module is imported only by `define_loop`, never by ``import ai_utils``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

try:
    import cel
except ImportError as _import_error:  # pragma: no cover - exercised by the bare install lane
    from ai_utils._optional import missing_extra

    raise missing_extra("common-expression-language", extra="loops", feature="governed loops") from _import_error

__all__ = ["Program", "compile_expression"]


def _is_panic(error: BaseException) -> bool:
    """Whether ``error`` is pyo3's ``PanicException`` (a Rust panic in the CEL library, a ``BaseException``).

    It cannot be imported by name (it lives in the ``pyo3_runtime`` pseudo-module), so it is matched by its
    module and name; every other ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``) propagates.
    """
    kind = type(error)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


class Program:
    """One compiled CEL expression; `evaluate` runs it over the loop context."""

    __slots__ = ("_program", "source")

    def __init__(self, source: str, program: Any) -> None:
        self.source = source
        self._program = program

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        """The expression's value over ``context`` (each root of the context is a CEL variable).

        Raises:
            ValueError: the expression failed at run time (undefined variable, no such key, bad types).
        """
        try:
            return self._program.execute(dict(context))
        except (LookupError, RuntimeError, TypeError, ValueError, OverflowError) as error:
            raise ValueError(str(error)) from error
        except BaseException as error:
            if not _is_panic(error):
                raise
            raise ValueError(f"the CEL library failed ({str(error)[:200]})") from None


def compile_expression(source: str) -> Program:
    """Parse ``source`` once (at `define_loop`).

    The caller bounds ``source`` (`ai_utils.loops._limits.MAX_EXPRESSION_CHARS`) first: the parser crashes the
    process, beyond any ``except``, on member chains of about 16,000 characters.

    Raises:
        ValueError: ``source`` is not valid CEL (also when the library panics on it).
    """
    try:
        return Program(source, cel.compile(source))
    except (RuntimeError, TypeError, ValueError, OverflowError) as error:
        raise ValueError(str(error)[:500]) from error
    except BaseException as error:
        if not _is_panic(error):
            raise
        raise ValueError(f"the CEL parser failed on it ({str(error)[:200]})") from None
