"""Guardrails (SPEC §16): one ordered policy engine as `create_agent` middleware — ``guardrails("standard")``.

```python
from ai_utils import Agent, guardrails

agent = Agent(llm=llm, tools=tools, checkpointer=MemorySaver(), middleware=guardrails("standard"))
```
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ai_utils.guardrails._engine import Guardrails
from ai_utils.guardrails._factory import guardrails
from ai_utils.guardrails._rules import ContentRule, GuardrailDecision, Phase, PolicyPack, StreamingMode
from ai_utils.guardrails._secrets import SECRET_KINDS

__all__ = [
    "SECRET_KINDS",
    "ContentRule",
    "GuardrailDecision",
    "Guardrails",
    "Phase",
    "PolicyPack",
    "StreamingMode",
    "guardrails",
]


class _CallableModule(types.ModuleType):
    """The package module, callable as the `guardrails` function.

    Importing the package binds ``ai_utils.guardrails`` to the module, shadowing the function that
    ``from ai_utils import guardrails`` promises; a call on the module therefore calls the function.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Guardrails:
        return guardrails(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
