"""Governed loops (SPEC §15): declared multi-step flows compiled to LangGraph, with permissions on every tool call.

```python
loop = define_loop("support-flow", start="triage", steps={...}, permissions=[...], result={...})
runner = LoopRunner(loop, llm=llm, tools=[...], checkpointer=sqlite_saver("runs.db"))
out = runner.invoke({"request": {...}}, thread_id="t1")
```
"""

from ai_utils.exceptions import LoopDefinitionError, LoopError, LoopPermissionDeniedError, LoopPolicyDeniedError
from ai_utils.loops._context import LoopResult
from ai_utils.loops._events import LoopEvent
from ai_utils.loops._hooks import command_hook, function_hook
from ai_utils.loops._loop import Loop, define_loop
from ai_utils.loops._rules import Permission, permission
from ai_utils.loops._steps import (
    AgentStep,
    Otherwise,
    RequireTool,
    ToolStep,
    When,
    agent_step,
    ctx,
    otherwise,
    require_tool,
    tool_step,
    when,
)
from ai_utils.loops._store import LoopRun, LoopRunStore, memory_loop_runs
from ai_utils.loops._store_sql import postgres_loop_runs, sqlite_loop_runs
from ai_utils.loops.runner import LoopRunner, RunState

__all__ = [
    "AgentStep",
    "Loop",
    "LoopDefinitionError",
    "LoopError",
    "LoopEvent",
    "LoopPermissionDeniedError",
    "LoopPolicyDeniedError",
    "LoopResult",
    "LoopRun",
    "LoopRunStore",
    "LoopRunner",
    "Otherwise",
    "Permission",
    "RequireTool",
    "RunState",
    "ToolStep",
    "When",
    "agent_step",
    "command_hook",
    "ctx",
    "define_loop",
    "function_hook",
    "memory_loop_runs",
    "otherwise",
    "permission",
    "postgres_loop_runs",
    "require_tool",
    "sqlite_loop_runs",
    "tool_step",
    "when",
]
