"""Every script in examples/ runs offline (no API keys in the environment) and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# Not standalone scripts: the web apps have their own browser tests; the MCP server is started by mcp_tools.py.
NOT_RUN = ["durable_chat.py", "fastapi_ndjson.py", "langgraph_server.py", "mcp_echo_server.py"]

EXPECTED = {
    "demo.py": "In Berlin ist es gerade sonnig",
    "get_llm_basics.py": "Assistant: Hallo! Ich bin ein geskriptetes Modell",
    "classify_triage.py": "category=technical  P(refund)=0.02  urgency=2.00",
    "chain_structured.py": "Brief: title='NoteAI'",
    "magic_funcs.py": "extract   -> Person(name='Max', age=30)",
    "agent_memory_approval.py": "outbox: ['to bob@example.com: Meeting moved to 3 pm.']",
    "deep_agent.py": "files in the workspace folder: ['index.html']",
    "jev_tool_caller.py": "return: cancel_order (confidence 0.80) -> order B-42 cancelled",
    "rag_search.py": "[tool:end] search_docs → [company_id: c1] Die Frühschicht beginnt um 6 Uhr",
    "mcp_tools.py": "[tool:end] echo__add → 42",
    "gateway_audit.py": "marketing blocked   tenant=acme",
    "smart_memory.py": "turn 12: the model sees  5 messages, raw history has 24",
    "governed_refund.py": "refund issued: R-A-1002 (refunds made: ['A-1002'])",
    "modes_router.py": "greet_user → Tool `greet_user` was refused: it is not allowed in mode `assessment`",
    "model_profiles.py": "requests: [('strict-model', 400)] (a 400 is never retried on another model)",
    "vision_and_images.py": "classify(llm=)  -> style=minimal (confidence 0.93)  P(shop ready)=0.96",
    "guardrails.py": "audit: 8 rows, 9 guardrail decisions, secrets in rows: False",
}

SCRIPTS = sorted(path.name for path in EXAMPLES.glob("*.py") if path.name not in NOT_RUN)


def test_every_runnable_example_has_an_expected_line() -> None:
    assert SCRIPTS == sorted(EXPECTED)


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_example_runs_offline_and_prints_its_key_line(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PYTHONIOENCODING="utf-8", COLUMNS="200", TMPDIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert EXPECTED[name] in done.stdout, done.stdout[-3000:]
    assert list(tmp_path.iterdir()) == []  # temp files are cleaned up
