"""Durable sessions (SPEC §14): conversations whose turns outlive the process running them.

```python
store = sqlite_sessions("data/sessions.sqlite")   # or postgres_sessions(conn_string), memory_sessions()
agent = Agent(llm=llm, tools=[durable_tool(lookup, idempotent=True)], sessions=store, name="support")
s = agent.session()                               # or agent.session(session_id) in any process
turn = s.prompt("Hi!")                            # returns once the prompt is stored
for chunk in turn: ...                            # the turn runs on its own; reading is optional
print(turn.result().stop_reason)
for line in s.stream(cursor=0): ...               # {"cursor", "chunk"}: replay, then live
```
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports

__all__ = [
    "Session",
    "SessionStore",
    "Turn",
    "TurnResult",
    "memory_sessions",
    "postgres_sessions",
    "sqlite_sessions",
]

if TYPE_CHECKING:
    from ai_utils.sessions._postgres import postgres_sessions
    from ai_utils.sessions._session import Session
    from ai_utils.sessions._sqlite import memory_sessions, sqlite_sessions
    from ai_utils.sessions._store import SessionStore
    from ai_utils.sessions._turn import Turn, TurnResult

_LAZY = {
    "Session": "ai_utils.sessions._session",
    "Turn": "ai_utils.sessions._turn",
    "TurnResult": "ai_utils.sessions._turn",
    "SessionStore": "ai_utils.sessions._store",
    "memory_sessions": "ai_utils.sessions._sqlite",
    "sqlite_sessions": "ai_utils.sessions._sqlite",
    "postgres_sessions": "ai_utils.sessions._postgres",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
