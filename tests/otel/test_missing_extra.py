"""Without ``opentelemetry-api`` (the ``otel`` extra) the package imports; using it names the install command."""

from __future__ import annotations

import subprocess
import sys

BLOCKER = """
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"blocked optional module {name}")
        return None
sys.meta_path.insert(0, Blocker())
"""


def test_instrument_and_tracer_provider_name_the_otel_extra_when_it_is_missing() -> None:
    code = (
        BLOCKER
        + """
import ai_utils.otel
from ai_utils import Agent
from ai_utils.testing import FakeChatModel

assert Agent(llm=FakeChatModel(["ok"])).invoke("hi") == "ok"  # nothing needs it without tracing
for attempt in (lambda: ai_utils.otel.instrument(), lambda: Agent(llm=FakeChatModel(["ok"]), tracer_provider=object())):
    try:
        attempt()
    except ImportError as error:
        print(error)
    else:
        raise SystemExit("no ImportError")
"""
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert (
        lines == ['Please install `opentelemetry-api` to use OpenTelemetry tracing: `pip install "ai-utils[otel]"`'] * 2
    )
