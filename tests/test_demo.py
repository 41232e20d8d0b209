"""The README's demo: offline with the scripted model, and through get_llm() when a key is set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _services import Aimock

DEMO = Path(__file__).parents[1] / "examples" / "demo.py"


def run_demo(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, str(DEMO)], env={**clean, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_demo_runs_offline_and_shows_the_tool_call_and_its_result() -> None:
    out = run_demo()
    assert "offline: scripted model" in out
    assert '[tool:start] get_weather {"city": "Berlin"}' in out
    assert "[tool:end] get_weather → Berlin: sonnig, 21 °C" in out
    assert "In Berlin ist es gerade sonnig" in out


def test_demo_uses_the_real_provider_path_when_a_key_is_set(aimock: Aimock) -> None:
    aimock.add(
        {
            "match": {"userMessage": "Wetter", "hasToolResult": False},
            "response": {"toolCalls": [{"name": "get_weather", "arguments": {"city": "Hamburg"}}]},
        },
        {"match": {"userMessage": "Wetter", "hasToolResult": True}, "response": {"content": "Regen in Hamburg."}},
    )
    out = run_demo(OPENROUTER_API_KEY="sk-test", OPENROUTER_BASE_URL=aimock.openrouter_base_url)
    assert "using the real provider" in out
    assert "[tool:end] get_weather → Hamburg: Regen, 14 °C" in out and "Regen in Hamburg." in out
    assert [body["model"] for body in aimock.request_bodies()] == ["openai/gpt-5.6-luna"] * 2
