"""Gateway and audit as LangChain callbacks: routing, policy, audit sinks, events, judge, feedback, actions.

- `Gateway(routes=[Route(feature, provider, model)], ...)`: ``gateway.llm(feature, actor=...)`` gives a governed
  chat model; ``gateway.callback(feature, actor=...)`` governs any LangChain run via ``callbacks=[...]``;
  ``gateway.complete`` / ``gateway.stream`` speak the seed's request/chunk API (per-request options,
  ``GatewayResponse``, `report_dropped_content` / `DroppedContentReport` for text-only routes).
- Policy: `feature_registered`, `require_actor`, `tool_allowlist`, `DEFAULT_POLICY`, `run_policy_chain`.
- Audit: `AuditEntry`; sinks `NoopAuditSink`, `MemoryAuditSink`, `JsonlAuditSink`, `SqliteAuditSink`,
  `SupabaseAuditSink` (extra ``supabase``, loaded on first use).
- `LLMJudge`; feedback (`validate_feedback`, sinks, `create_feedback_route`); actions (`ActionRegistry`, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports
from ai_utils.gateway.actions import (
    ActionDefinition,
    ActionPolicyContext,
    ActionPolicyResult,
    ActionProposal,
    ActionRegistry,
    ContextBlock,
    DirectiveResult,
    ParsedDirectives,
    ValidatedAction,
    default_action_policy,
    define_action,
    parse_assistant_directives,
    render_context_blocks,
    validate_directives,
)
from ai_utils.gateway.actor import Actor, ActorLike, to_actor
from ai_utils.gateway.audit import (
    AuditEntry,
    AuditSink,
    AuditStatus,
    JsonlAuditSink,
    MemoryAuditSink,
    NoopAuditSink,
    SqliteAuditSink,
)
from ai_utils.gateway.callbacks import GatewayCallbackHandler
from ai_utils.gateway.completion import (
    GatewayResponse,
    GatewayStream,
    StreamChunk,
    StreamFinal,
    aconsume_stream,
    consume_stream,
)
from ai_utils.gateway.dropped import DroppedContentReport, report_dropped_content
from ai_utils.gateway.errors import AuditWriteError, ErrorType, GatewayError, classify_llm_error
from ai_utils.gateway.events import GatewayEvent, GatewayEventType
from ai_utils.gateway.feedback import (
    FeedbackEntry,
    FeedbackSink,
    FeedbackValidationError,
    MemoryFeedbackSink,
    NoopFeedbackSink,
    SqliteFeedbackSink,
    create_feedback_route,
    validate_feedback,
)
from ai_utils.gateway.gateway import AuditMode, Gateway
from ai_utils.gateway.hashing import hash_canonical, truncate_for_audit
from ai_utils.gateway.judge import DimensionScore, JudgeDimension, JudgeResult, JudgeRubric, LLMJudge
from ai_utils.gateway.policy import (
    DEFAULT_POLICY,
    PolicyContext,
    PolicyDecision,
    PolicyRule,
    feature_registered,
    require_actor,
    run_policy_chain,
    tool_allowlist,
)
from ai_utils.gateway.route import Route

if TYPE_CHECKING:
    from ai_utils.gateway.supabase_audit import SupabaseAuditSink, supabase_audit_sql
    from ai_utils.gateway.supabase_feedback import SupabaseFeedbackSink, supabase_feedback_sql

__all__ = [
    "DEFAULT_POLICY",
    "ActionDefinition",
    "ActionPolicyContext",
    "ActionPolicyResult",
    "ActionProposal",
    "ActionRegistry",
    "Actor",
    "ActorLike",
    "AuditEntry",
    "AuditMode",
    "AuditSink",
    "AuditStatus",
    "AuditWriteError",
    "ContextBlock",
    "DimensionScore",
    "DirectiveResult",
    "DroppedContentReport",
    "ErrorType",
    "FeedbackEntry",
    "FeedbackSink",
    "FeedbackValidationError",
    "Gateway",
    "GatewayCallbackHandler",
    "GatewayError",
    "GatewayEvent",
    "GatewayEventType",
    "GatewayResponse",
    "GatewayStream",
    "JsonlAuditSink",
    "JudgeDimension",
    "JudgeResult",
    "JudgeRubric",
    "LLMJudge",
    "MemoryAuditSink",
    "MemoryFeedbackSink",
    "NoopAuditSink",
    "NoopFeedbackSink",
    "ParsedDirectives",
    "PolicyContext",
    "PolicyDecision",
    "PolicyRule",
    "Route",
    "SqliteAuditSink",
    "SqliteFeedbackSink",
    "StreamChunk",
    "StreamFinal",
    "SupabaseAuditSink",
    "SupabaseFeedbackSink",
    "ValidatedAction",
    "aconsume_stream",
    "classify_llm_error",
    "consume_stream",
    "create_feedback_route",
    "default_action_policy",
    "define_action",
    "feature_registered",
    "hash_canonical",
    "parse_assistant_directives",
    "render_context_blocks",
    "report_dropped_content",
    "require_actor",
    "run_policy_chain",
    "supabase_audit_sql",
    "supabase_feedback_sql",
    "to_actor",
    "tool_allowlist",
    "truncate_for_audit",
    "validate_directives",
    "validate_feedback",
]

# Supabase names load on first use, so `import ai_utils.gateway` works without the extra.
_LAZY = {
    "SupabaseAuditSink": "ai_utils.gateway.supabase_audit",
    "supabase_audit_sql": "ai_utils.gateway.supabase_audit",
    "SupabaseFeedbackSink": "ai_utils.gateway.supabase_feedback",
    "supabase_feedback_sql": "ai_utils.gateway.supabase_feedback",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
