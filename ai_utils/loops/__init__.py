"""Governed loops (SPEC §15): declared multi-step flows compiled to LangGraph, with permissions on every tool call.

```python
loop = define_loop("support-flow", start="triage", steps={...}, permissions=[...], result={...})
runner = LoopRunner(loop, llm=llm, tools=[...], checkpointer=sqlite_saver("runs.db"))
out = runner.invoke({"request": {...}}, thread_id="t1")
```
"""

from ai_utils.exceptions import LoopDefinitionError, LoopError, LoopPermissionDeniedError
from ai_utils.loops._context import LoopResult
from ai_utils.loops._events import LoopEvent
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
from ai_utils.loops.runner import LoopRunner, RunState

__all__ = [
    "AgentStep",
    "Loop",
    "LoopDefinitionError",
    "LoopError",
    "LoopEvent",
    "LoopPermissionDeniedError",
    "LoopResult",
    "LoopRunner",
    "Otherwise",
    "Permission",
    "RequireTool",
    "RunState",
    "ToolStep",
    "When",
    "agent_step",
    "ctx",
    "define_loop",
    "otherwise",
    "permission",
    "require_tool",
    "tool_step",
    "when",
]
