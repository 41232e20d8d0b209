"""Guardrails (SPEC §16): one ordered policy engine as `create_agent` middleware — ``guardrails("standard")``.

Also context trust (SPEC §16b): `trust_segment` renders outside content as a bounded data block, and
``Agent(..., context_trust="enforce")`` wraps every tool result with it; `context_accounting` counts a
request's tokens by category.

The package is `ai_utils.guard`, so importing it never shadows the top-level `guardrails` function.

```python
from ai_utils import Agent, guardrails

agent = Agent(llm=llm, tools=tools, checkpointer=MemorySaver(), middleware=guardrails("standard"))
```
"""

from __future__ import annotations

from ai_utils._secrets import SECRET_KINDS
from ai_utils.guard._accounting import ContextCategory, ContextSegment, context_accounting
from ai_utils.guard._engine import Guardrails
from ai_utils.guard._factory import guardrails
from ai_utils.guard._host import POLICY_TIMEOUT, PolicyResult
from ai_utils.guard._rules import ContentRule, GuardMode, GuardrailDecision, Phase, PolicyPack, StreamingMode
from ai_utils.guard._trust import TRUST_INSTRUCTION, ContextTrustMode, TrustLevel, trust_segment

__all__ = [
    "POLICY_TIMEOUT",
    "SECRET_KINDS",
    "TRUST_INSTRUCTION",
    "ContentRule",
    "ContextCategory",
    "ContextSegment",
    "ContextTrustMode",
    "GuardMode",
    "GuardrailDecision",
    "Guardrails",
    "Phase",
    "PolicyPack",
    "PolicyResult",
    "StreamingMode",
    "TrustLevel",
    "context_accounting",
    "guardrails",
    "trust_segment",
]
