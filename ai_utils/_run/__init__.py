"""The one run path every wrapper shares (`Agent`, `DeepAgent`, `JevToolCaller`, durable sessions, loop steps).

A neutral room: it imports the rooms it builds on (client, streaming, tools, memory helpers), never a wrapper.

- `runner`: `GraphRunner`, the invoke/stream/astream shells over one async core.
- `calls`: call checks, run config, input-or-resume, result mapping.
- `args`, `context`, `locks`: argument checks wrappers share, the `context_schema` check, the per-thread lock.
- `repair`, `guards`, `hitl`, `state`: the middleware every wrapper's graph gets (thread repair, run guards,
  approval config) and the agent state schema.
"""
