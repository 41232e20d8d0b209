"""Actions the model may propose, gated by a policy: registry, directives and context blocks.

```python
from ai_utils.gateway.actions import ActionRegistry, define_action, parse_assistant_directives

actions = ActionRegistry([
    define_action(id="ticket.summarize", description="Summarize a ticket.", risk="safe",
                  availability="authenticated"),
    define_action(id="ticket.issue_refund", description="Issue a refund.", risk="restricted", availability="admin"),
])
reply = '''Here is your summary.
!> ticket.summarize {"id": "TKT-1"}
?> Draft a reply'''
parsed = parse_assistant_directives(reply)   # .text, .actions, .follow_ups, .parse_errors
[actions.validate(p, {"user_id": "u1"}) for p in parsed.actions]   # status: allowed / requires_confirmation / blocked
```
"""

from ai_utils.gateway.actions._context import ContextBlock, render_context_blocks
from ai_utils.gateway.actions._directives import (
    DirectiveResult,
    ParsedDirectives,
    parse_assistant_directives,
    validate_directives,
)
from ai_utils.gateway.actions._registry import (
    ActionAvailability,
    ActionDefinition,
    ActionPolicy,
    ActionPolicyContext,
    ActionPolicyResult,
    ActionProposal,
    ActionRegistry,
    ActionRisk,
    ValidatedAction,
    ValidatedActionStatus,
    default_action_policy,
    define_action,
)

__all__ = [
    "ActionAvailability",
    "ActionDefinition",
    "ActionPolicy",
    "ActionPolicyContext",
    "ActionPolicyResult",
    "ActionProposal",
    "ActionRegistry",
    "ActionRisk",
    "ContextBlock",
    "DirectiveResult",
    "ParsedDirectives",
    "ValidatedAction",
    "ValidatedActionStatus",
    "default_action_policy",
    "define_action",
    "parse_assistant_directives",
    "render_context_blocks",
    "validate_directives",
]
