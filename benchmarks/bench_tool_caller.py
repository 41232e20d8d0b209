"""JevToolCaller overhead beyond its Jev API calls (report only).

Ours: one ``invoke`` that makes the two Jev calls (tool, then two ambiguous params) and runs ``func``.
Anchor: the same two requests made with a pooled `JevClient` (``classify``), the same bodies, same fake server.
The ratio (and the difference of medians) is what the graph, candidate handling and checkpointing add.
"""

from __future__ import annotations

import itertools
from typing import Any

from _harness import Metric
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils.jev import JevClient, JevTool, JevToolCaller
from ai_utils.jev.tool_caller import _core as core
from ai_utils.testing.jev_server import FakeJevServer

REQUEST = {"question": "Welcher Max Müller wurde 2002 geboren?", "locale": "de-DE"}
CANDIDATES = {
    "candidate": [{"id": f"c-{i}", "name": "Max Müller", "born": 1990 + i} for i in range(20)],
    "permission": ["read", "write"],
}

_server: FakeJevServer | None = None


def _jev() -> FakeJevServer:
    global _server
    if _server is None:
        _server = FakeJevServer().start()
        _server.answer("tool", choice="get_candidate")
    return _server


def _tools() -> list[JevTool]:
    return [
        JevTool("get_candidate", "Returns a candidate from the recruiting system.", lambda params: params, CANDIDATES),
        JevTool("healthcheck", "Checks whether the recruiting system is reachable.", lambda: "ok"),
    ]


def metrics() -> list[Metric]:
    jev = _jev()
    plain = JevToolCaller(tools=_tools(), api_key=jev.api_key, base_url=jev.url)
    saved = JevToolCaller(tools=_tools(), api_key=jev.api_key, base_url=jev.url, checkpointer=InMemorySaver())
    threads = itertools.count()
    client = JevClient(api_key=jev.api_key, base_url=jev.url)
    entries = [core.ToolEntry(t.name, t.description, t.func, t.params) for t in _tools()]
    state = core.jev_state(core.system_prompt(None), [], REQUEST)
    tool_question = core.tool_question(entries)
    param_questions, _, _ = core.param_questions(entries[0], list(CANDIDATES), CANDIDATES)

    def anchor() -> None:
        assert client.classify(state, tool_question).answers["tool"].choice == "get_candidate"
        client.classify(state, param_questions)

    def ours() -> None:
        assert plain.invoke(REQUEST).kind == "return"

    def ours_saved() -> None:
        # a fresh thread per sample, so the history (and the request body) stays the anchor's size
        assert saved.invoke(REQUEST, thread_id=f"t{next(threads)}").kind == "return"

    async def ours_async() -> None:
        out: Any = await plain.ainvoke(REQUEST)
        assert out.kind == "return"

    async def anchor_async() -> None:
        async with JevClient(api_key=jev.api_key, base_url=jev.url) as run_client:
            await run_client.aclassify(state, tool_question)
            await run_client.aclassify(state, param_questions)

    note = (
        "report only: 2 Jev calls (tool; 2 ambiguous params, 20 + 2 candidates) vs the same 2 requests via "
        "JevClient.classify; FakeJevServer on 127.0.0.1"
    )
    return [
        Metric("JevToolCaller.invoke / 2x JevClient.classify", ours, anchor, None, note=note),
        Metric("JevToolCaller.invoke +InMemorySaver / 2x JevClient.classify", ours_saved, anchor, None, note=note),
        Metric(
            "JevToolCaller.ainvoke / 2x JevClient.aclassify (client per run)",
            ours_async,
            anchor_async,
            None,
            note=note,
        ),
    ]
