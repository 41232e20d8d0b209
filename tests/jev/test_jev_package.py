"""The ai_utils.jev package surface."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ai_utils.jev


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert ai_utils.jev.__all__ == sorted(ai_utils.jev.__all__)
    for name in ai_utils.jev.__all__:
        assert getattr(ai_utils.jev, name) is not None, name


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        ai_utils.jev.Nope  # noqa: B018


def test_classify_loads_no_langchain_module_until_jev_decision_model_is_used() -> None:
    code = (
        "import sys\n"
        "import ai_utils.jev\n"
        "from ai_utils.jev import Questions, classify, choice\n"
        "before = sorted(m for m in sys.modules if m.startswith('lang'))\n"
        "ai_utils.jev.JevDecisionModel\n"
        "print(before, 'langchain_core.decisions' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[] True"
