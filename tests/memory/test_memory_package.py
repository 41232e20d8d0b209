from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import ai_utils.memory as memory

BLOCKER = """
import importlib.abc, sys
BLOCKED = ("supabase", "postgrest", "psycopg", "psycopg_pool", "langgraph.checkpoint.sqlite",
           "langgraph.checkpoint.postgres", "aiosqlite")
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"blocked optional module {name}")
        return None
sys.meta_path.insert(0, Blocker())
"""


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_all_is_sorted_and_lists_the_lazy_names_and_the_factories() -> None:
    assert memory.__all__ == sorted(memory.__all__)
    assert set(memory.__all__) == set(memory._LAZY) | {"sqlite_saver", "postgres_saver"}
    assert dir(memory) == memory.__all__


def test_every_public_name_resolves() -> None:
    for name in memory.__all__:
        assert getattr(memory, name) is not None, name
    from langgraph.checkpoint.memory import InMemorySaver

    assert memory.MemorySaver is InMemorySaver


def test_an_unknown_name_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        memory.nope  # noqa: B018


def test_type_checking_block_matches_the_lazy_table() -> None:
    tree = ast.parse(Path(memory.__file__).read_text())
    imported: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module is not None
                for alias in stmt.names:
                    imported[alias.asname or alias.name] = (stmt.module, alias.name)
    assert imported == memory._LAZY


def test_importing_memory_loads_no_optional_dependency() -> None:
    out = _run(
        "import sys, ai_utils.memory\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('supabase', 'postgrest', 'psycopg', 'aiosqlite')"
        " or m.startswith(('langgraph.checkpoint.sqlite', 'langgraph.checkpoint.postgres'))))"
    )
    assert out.strip() == "[]"


def test_core_helpers_work_and_savers_name_their_extra_when_it_is_missing() -> None:
    out = _run(
        BLOCKER
        + """
from ai_utils.memory import MemorySaver, chat_summarizer, sqlite_saver, postgres_saver
from langchain_core.messages import HumanMessage
from ai_utils.testing import static_model
print(type(MemorySaver()).__name__)
print(chat_summarizer([HumanMessage("hi")], llm=static_model("sum")))
for make in (lambda: sqlite_saver(":memory:"), lambda: postgres_saver("postgresql://x")):
    try:
        make()
    except ImportError as error:
        print(error)
for name in ("SupabaseCheckpointSaver", "SqliteCheckpointSaver", "PostgresCheckpointSaver"):
    try:
        getattr(__import__("ai_utils.memory", fromlist=[name]), name)
    except ImportError as error:
        print(error)
"""
    )
    lines = out.strip().splitlines()
    assert lines[:2] == ["InMemorySaver", "sum"]
    assert 'pip install "ai-utils[sqlite]"' in lines[2] and "sqlite_saver()" in lines[2]
    assert 'pip install "ai-utils[postgres]"' in lines[3]
    assert 'pip install "ai-utils[supabase]"' in lines[4]
    assert "ai-utils[sqlite]" in lines[5] and "ai-utils[postgres]" in lines[6]
