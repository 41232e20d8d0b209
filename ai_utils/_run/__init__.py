"""The one run path of the graph wrappers (`Agent`, `DeepAgent`; durable session turns run through it too).

A neutral room: it imports the rooms it builds on (client, streaming, tools, llm), never a wrapper, sessions or
loops — not even for type checking (``tests/test_architecture.py``). What those rooms add, they hand in.

- `runner`: `GraphRunner`, the invoke/ainvoke/stream/astream shells over the shared steps.
- `calls`: `RunCall` and its typed options, call checks, run config, input-or-resume, result mapping.
- `setup`: `Wrapper`, the constructor steps every wrapper shares, and `WrapperOptions` for its overloads.
- `threads`, `durable`: reading a thread's state; the `Sessions` link durable sessions hand a wrapper.
- `args`, `context`, `locks`: argument checks wrappers share, the `context_schema` check, the per-thread lock.
- `repair`, `guards`, `hitl`, `state`: the middleware every wrapper's graph gets (thread repair, run guards,
  approval config) and the agent state schema.
- `tracing`: the one tracing slot (run, model-call and tool-call spans of our runs, through a tracer handed in).
"""
