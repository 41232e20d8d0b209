"""`JevToolCaller`: bounded tool calling with Jev.

Jev picks one tool and, for its parameters, only values from candidate lists you provide; the tool then
runs exactly once. No generated arguments, no loop.

```python
caller = JevToolCaller(
    tools=[
        JevTool("get_candidate", "Returns a candidate from the recruiting system.",
                func=lambda params, context: fetch(params["candidate"], context.api_token),
                params=lambda context: {"candidate": load_candidates(context.tenant_id)}),
        JevTool("healthcheck", "Checks whether the recruiting system is reachable.", func=check_health),
    ],
    context_schema=Ctx,
    checkpointer=MemorySaver(),
)
out = caller.invoke({"question": "Which Max Müller was born in 2002?"}, thread_id="u1", context=ctx)
if out.kind == "return" and not out.rejected:
    out.value, out.tool.name, out.params["candidate"].value
```

Flow (a LangGraph graph, see `_graph`): Jev call 1 picks the tool; only that tool's ``params``
are resolved; Jev call 2 picks every ambiguous parameter at once (skipped when each list has one element);
the confidence gate (always on) may return `JevGated`; ``interrupt_on`` may pause with `JevInterrupt`;
``func`` runs once. ``context`` reaches your callables only: never Jev, a checkpoint or debug metadata.

Resuming a paused proposal (``decision=...``), possibly in another process, calls the tool's ``params``
again with the new ``context`` and takes the approved candidate from that list (checked by its JSON
rendering), since checkpoints store candidates as JSON, never as objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports

if TYPE_CHECKING:
    from ai_utils.jev.tool_caller._caller import JevToolCaller

__all__ = ["JevToolCaller"]

# Lazy, so that `ai_utils.jev` can import the data types (`_types`, pydantic only) without LangGraph.
__getattr__, __dir__ = lazy_exports(__name__, {"JevToolCaller": "ai_utils.jev.tool_caller._caller"}, globals(), __all__)
