"""Guardrails (SPEC §16): one ordered policy engine as `create_agent` middleware — ``guardrails("standard")``.

The package is `ai_utils.guard`, so importing it never shadows the top-level `guardrails` function.

```python
from ai_utils import Agent, guardrails

agent = Agent(llm=llm, tools=tools, checkpointer=MemorySaver(), middleware=guardrails("standard"))
```
"""

from __future__ import annotations

from ai_utils.guard._engine import Guardrails
from ai_utils.guard._factory import guardrails
from ai_utils.guard._host import POLICY_TIMEOUT, PolicyResult
from ai_utils.guard._rules import ContentRule, GuardMode, GuardrailDecision, Phase, PolicyPack, StreamingMode
from ai_utils.guard._secrets import SECRET_KINDS

__all__ = [
    "POLICY_TIMEOUT",
    "SECRET_KINDS",
    "ContentRule",
    "GuardMode",
    "GuardrailDecision",
    "Guardrails",
    "Phase",
    "PolicyPack",
    "PolicyResult",
    "StreamingMode",
    "guardrails",
]
