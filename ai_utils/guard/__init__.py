"""Guardrails (SPEC §16): one ordered policy engine as `create_agent` middleware — ``guardrails("standard")``.

The package is `ai_utils.guard`, so importing it never shadows the top-level `guardrails` function.

```python
from ai_utils import Agent, guardrails

agent = Agent(llm=llm, tools=tools, checkpointer=MemorySaver(), middleware=guardrails("standard"))
```
"""

from __future__ import annotations

from ai_utils._secrets import SECRET_KINDS
from ai_utils.guard._engine import Guardrails
from ai_utils.guard._factory import guardrails
from ai_utils.guard._rules import ContentRule, GuardrailDecision, Phase, PolicyPack, StreamingMode

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
