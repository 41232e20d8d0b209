"""The HTTP edge (SPEC §20): agent runs and durable sessions as Starlette routes.

In NDJSON, AG-UI or the Vercel AI SDK UI message stream; authenticated, owned by their actor, with one JSON
error shape:

```python
routes = [*agent_routes(agent, authenticate=check_token), *session_routes(durable, authenticate=check_token)]
app = Starlette(routes=routes)
```

Imports lazily (PEP 562): the routes need Starlette (extra ``server``), the AG-UI stream ``ag-ui-protocol``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports

__all__ = ["agent_routes", "session_routes"]

if TYPE_CHECKING:
    from ai_utils.server._agent import agent_routes
    from ai_utils.server._sessions import session_routes

_LAZY = {
    "agent_routes": "ai_utils.server._agent",
    "session_routes": "ai_utils.server._sessions",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
