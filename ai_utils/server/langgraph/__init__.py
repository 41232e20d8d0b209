"""LangGraph clients talk to ai_utils (SPEC §21): the LangGraph Server API over durable sessions.

```python
app = Starlette(routes=langgraph_api_routes({"support": agent}, sessions=store, authenticate=check_token))
```

Then ``langgraph_sdk.get_client(url=...)``, ``RemoteGraph("support", url=...)`` or the JS ``Client`` /
``useStream`` talk to the agent as to a LangGraph Server. Layout: pure mappers (``_schema.py`` session ->
Thread, turn -> Run; ``_parts.py`` chunk -> stream part; ``_messages.py`` messages in and out), request bodies
(``_bodies.py``), the API's rows (``_tables.py``), following a run's log (``_follow.py``), runs
(``_runs.py``), thin routes (``_routes.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports

__all__ = ["langgraph_api_routes"]

if TYPE_CHECKING:
    from ai_utils.server.langgraph._routes import langgraph_api_routes

_LAZY = {"langgraph_api_routes": "ai_utils.server.langgraph._routes"}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
