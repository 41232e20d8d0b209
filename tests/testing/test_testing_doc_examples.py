"""The usage examples in the docstrings are what users copy: they must run as written."""

from __future__ import annotations

import inspect
import re
import textwrap

import pytest

import ai_utils.testing
from ai_utils.testing import FakeChatModel, FunctionChatModel, openai_server

_CODE = re.compile(r"```python\n(.*?)```", re.DOTALL)


@pytest.mark.parametrize(
    "documented", [ai_utils.testing, FakeChatModel, FunctionChatModel, openai_server], ids=lambda o: o.__name__
)
def test_docstring_examples_run(documented: object) -> None:
    blocks = _CODE.findall(inspect.getdoc(documented) or "")

    assert blocks, "the docstring should show a usage example"
    for block in blocks:
        exec(compile(textwrap.dedent(block), f"<{documented.__name__} example>", "exec"), {})  # type: ignore[attr-defined]
