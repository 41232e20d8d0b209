"""The room rule of docs/architecture.md, checked on the code: no module imports a room listed below its own.

The rooms and their order are read from the table in ``docs/architecture.md`` (its first column), so the doc
and the code cannot drift apart: a new folder must be added to the table, and moving a room changes what may
import it. Every ``import`` counts, at module level and inside functions (a lazy import is still a dependency);
only imports under ``if TYPE_CHECKING:`` are exempt, because they never run and serve annotations alone.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import ai_utils

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ai_utils"
DOC = ROOT / "docs" / "architecture.md"

# Imports that break the rule today, in modules other helpers own (issue #16): (module file, imported module).
# Each entry is a violation to remove; the test fails when one no longer occurs, so the entry goes too.
KNOWN_VIOLATIONS: set[tuple[str, str]] = {
    # llm/ reaches down into routing/ (profile fallback chains) and testing/ (the fake models behind "fake:").
    ("llm/_factory.py", "ai_utils.routing._fallback"),
    ("llm/_factory.py", "ai_utils.testing"),
    # testing/'s MemoryAuditSink builds on the gateway's audit records, a room below testing/.
    ("testing/audit.py", "ai_utils.gateway.audit"),
}

# client.py's imports outside the standard library.
KNOWN_CLIENT_IMPORTS: set[str] = {
    "typing_extensions",  # TypeIs / closed TypedDict backports for Python 3.11
}


class Import(NamedTuple):
    file: str  # relative to ai_utils/
    line: int
    module: str  # absolute, e.g. "ai_utils.tools.mcp"


def rooms() -> list[list[str]]:
    """The first column of the doc's room table, one list of entries per row, top (imported by all) first."""
    section = DOC.read_text().split("## Rooms", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]  # skip the header and `|---|`
    table = [re.findall(r"`([^`]+)`", row.split("|")[1]) for row in rows]
    assert table and all(table), f"no room table found in {DOC}"
    return table


def room_index() -> dict[str, int]:
    """``"llm/"`` or ``"client.py"`` -> its row."""
    return {entry: row for row, entries in enumerate(rooms()) for entry in entries}


def room_of(module: str, index: dict[str, int]) -> str | None:
    """The room entry of an ``ai_utils`` module (``None`` for the package facade ``ai_utils`` itself)."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    for entry in (f"{parts[0]}/", f"{parts[0]}.py"):
        if entry in index:
            return entry
    raise AssertionError(f"ai_utils.{parts[0]} is in no room: add it to the room table of {DOC.name}")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: resolve against this module's package
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
    if base != "ai_utils":
        yield base
        return
    for alias in node.names:  # `from ai_utils import x`: a room, or a lazily re-exported name
        if (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").is_file():
            yield f"ai_utils.{alias.name}"
        elif alias.name in ai_utils._LAZY:
            target = ai_utils._LAZY[alias.name]
            yield target if isinstance(target, str) else target[0]
        # else a name the facade defines itself (``__version__``): no room behind it


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of ``body`` except what sits under ``if TYPE_CHECKING:``, at any depth."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def source_imports(
    source: str, module: str, *, is_package: bool = False, type_checking: bool = False
) -> Iterator[tuple[int, str]]:
    """``(line, imported module)`` for the source of ``module`` (with ``type_checking``, also the exempt ones)."""
    tree = ast.parse(source)
    nodes = ast.walk(tree) if type_checking else _runtime_nodes(tree.body)
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in _targets(node, module, is_package):
                yield node.lineno, target


def imports(path: Path, *, type_checking: bool = False) -> Iterator[Import]:
    """The imports of one file of the package (with ``type_checking``, also those under ``if TYPE_CHECKING:``)."""
    found = source_imports(
        path.read_text(), module_name(path), is_package=path.name == "__init__.py", type_checking=type_checking
    )
    for line, target in found:
        yield Import(str(path.relative_to(PACKAGE)), line, target)


def violations() -> list[Import]:
    index = room_index()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "__init__.py":
            continue  # the public facade re-exports every room (lazily); it is no room itself
        own = room_of(module_name(path), index)
        assert own is not None
        for imp in imports(path):
            if imp.module.split(".")[0] != "ai_utils":
                continue
            target = room_of(imp.module, index)
            if target is not None and index[target] > index[own]:
                found.append(imp)
    return found


def test_every_module_sits_in_a_room_of_the_table() -> None:
    index = room_index()
    for path in PACKAGE.rglob("*.py"):
        if path != PACKAGE / "__init__.py":
            room_of(module_name(path), index)  # raises, naming the module, when its room is missing


def test_no_module_imports_a_room_below_its_own() -> None:
    found = violations()
    new = [imp for imp in found if (imp.file, imp.module) not in KNOWN_VIOLATIONS]
    index = room_index()
    assert not new, "imports of a room listed below the importer's in docs/architecture.md:\n" + "\n".join(
        f"  ai_utils/{i.file}:{i.line} imports {i.module} ({room_of(i.module, index)} is below "
        f"{room_of(module_name(PACKAGE / i.file), index)})"
        for i in new
    )


def test_known_violations_still_occur() -> None:
    """An entry that no longer occurs must leave KNOWN_VIOLATIONS, so the list only shrinks."""
    occurring = {(imp.file, imp.module) for imp in violations()}
    assert sorted(KNOWN_VIOLATIONS - occurring) == []


def test_client_imports_only_the_standard_library() -> None:
    found = {
        imp.module.split(".")[0]
        for imp in imports(PACKAGE / "client.py", type_checking=True)
        if imp.module.split(".")[0] not in sys.stdlib_module_names and imp.module != "__future__"
    }
    assert found - KNOWN_CLIENT_IMPORTS == set(), f"client.py must import only the standard library, got {found}"
    assert sorted(KNOWN_CLIENT_IMPORTS - found) == [], "client.py no longer imports these: drop them from the list"


def test_the_checker_sees_lazy_and_relative_imports_and_skips_type_checking_ones() -> None:
    # The rule would be hollow if function-level imports slipped through; TYPE_CHECKING ones are exempt.
    source = """
from typing import TYPE_CHECKING
from . import _hooks
from ..tools.mcp import mcp_scope
if TYPE_CHECKING:
    from ai_utils.sessions._store import SessionStore
else:
    import ai_utils.memory
def build():
    from ai_utils.routing._middleware import ModeMiddleware
    from ai_utils import Agent, __version__
"""
    seen = [module for _, module in source_imports(source, "ai_utils.agents.agent")]
    assert sorted(seen) == [
        "ai_utils.agents",  # `Agent`, a lazily re-exported name, resolved to its module (`__version__` to none)
        "ai_utils.agents",  # `from . import _hooks`: relative to the module's package
        "ai_utils.memory",  # the `else:` branch of `if TYPE_CHECKING:` does run
        "ai_utils.routing._middleware",  # inside a function
        "ai_utils.tools.mcp",
        "typing",
    ]
    assert "ai_utils.sessions._store" not in seen
    assert "ai_utils.sessions._store" in [
        m for _, m in source_imports(source, "ai_utils.agents.agent", type_checking=True)
    ]


def test_the_run_path_imports_no_room_below_it_even_for_type_checking() -> None:
    # The one run path must not know its users (wrappers, sessions, loops): they plug into it, not the reverse.
    index = room_index()
    below = [
        f"ai_utils/{imp.file}:{imp.line} imports {imp.module}"
        for path in sorted((PACKAGE / "_run").glob("*.py"))
        for imp in imports(path, type_checking=True)
        if imp.module.startswith("ai_utils.") and index[room_of(imp.module, index) or "_run/"] > index["_run/"]
    ]
    assert below == []
