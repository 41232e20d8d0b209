"""Human feedback (1–5 ratings) tied to a gateway request id: validation, sinks and an ASGI route.

```python
from starlette.applications import Starlette
from starlette.routing import Route

from ai_utils.gateway.feedback import SqliteFeedbackSink, create_feedback_route

async def authenticate(request):
    user = await my_session_user(request)
    return {"actor": {"user_id": user.id, "tenant_id": user.org}} if user else None

endpoint = create_feedback_route(authenticate=authenticate, sink=SqliteFeedbackSink("audit.db"))
app = Starlette(routes=[Route("/api/feedback", endpoint, methods=["POST"])])
```

The client POSTs ``{"request_id": ..., "score": 1-5, "comment"?, "tags"?, "metadata"?}``; the user id always comes
from ``authenticate``, never from the body. Rows share ``request_id`` with the audit log, so they join on it.
"""

# The limits stay reachable as `ai_utils.gateway.feedback.MAX_*`, as before the split.
from ai_utils.gateway.feedback._route import MAX_BODY_BYTES as MAX_BODY_BYTES
from ai_utils.gateway.feedback._route import MAX_DEPTH as MAX_DEPTH
from ai_utils.gateway.feedback._route import create_feedback_route
from ai_utils.gateway.feedback._sinks import FeedbackSink, MemoryFeedbackSink, NoopFeedbackSink, SqliteFeedbackSink
from ai_utils.gateway.feedback._validation import MAX_COMMENT_LENGTH as MAX_COMMENT_LENGTH
from ai_utils.gateway.feedback._validation import (
    FeedbackEntry,
    FeedbackValidationError,
    validate_feedback,
)

__all__ = [
    "FeedbackEntry",
    "FeedbackSink",
    "FeedbackValidationError",
    "MemoryFeedbackSink",
    "NoopFeedbackSink",
    "SqliteFeedbackSink",
    "create_feedback_route",
    "validate_feedback",
]
