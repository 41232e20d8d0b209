"""In-process streaming (performance.md metric 5): our typed NDJSON stream vs ``astream(stream_mode="messages")``.

Ours: ``Agent.astream(...)`` -> client chunks -> ``encode_chunk`` bytes. Anchor: the same model and tool in a
plain ``create_agent`` graph, ``graph.astream(stream_mode="messages")``, ``orjson.dumps`` of each non-empty
text (what a hand-written endpoint sends). No checkpointer on either side; a 200-word answer streamed word by
word, so both paths yield 200 lines.

The UI protocol encoders (AG-UI, the Vercel AI UI message stream) are compared with our NDJSON encoder as the
routes run them: the async line generator over the same chunk source (`aencode_events` vs `andjson_lines`).
"""

from __future__ import annotations

from typing import Any

import orjson
from _fixtures import LONG_REPLY, PLAIN_PROMPT, add, forget_calls, scripted_model
from _harness import Metric, Session
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from ai_utils import ActionRegistry, Agent, define_action
from ai_utils.client import ToolEvent
from ai_utils.streaming import andjson_lines, encode_chunk
from ai_utils.streaming._ag_ui import AgUiEncoder
from ai_utils.streaming._ui import UIEncoder, aencode_events
from ai_utils.streaming._vercel import VercelEncoder

CHUNKS = 200
ENCODES = 2000


def metrics() -> list[Metric]:
    ours_model = scripted_model(LONG_REPLY)
    anchor_model = scripted_model(LONG_REPLY)
    agent = Agent(llm=ours_model, tools=[add])
    graph = create_agent(anchor_model, [add])
    graph_input = {"messages": [HumanMessage(PLAIN_PROMPT)]}

    def reset() -> None:
        forget_calls(ours_model)
        forget_calls(anchor_model)

    async def ours() -> None:
        lines = [encode_chunk(chunk) async for chunk in agent.astream(PLAIN_PROMPT)]
        assert len(lines) == CHUNKS, len(lines)

    async def anchor() -> None:
        lines = [
            orjson.dumps(message.text)
            async for message, _meta in graph.astream(graph_input, stream_mode="messages")
            if message.text
        ]
        assert len(lines) == CHUNKS, len(lines)

    async def ours_first() -> float:
        import time

        start = time.perf_counter()
        stream: Any = agent.astream(PLAIN_PROMPT)
        encode_chunk(await anext(stream))
        elapsed = time.perf_counter() - start
        await stream.aclose()
        return elapsed

    async def anchor_first() -> float:
        import time

        start = time.perf_counter()
        stream: Any = graph.astream(graph_input, stream_mode="messages")
        async for message, _meta in stream:
            if message.text:
                orjson.dumps(message.text)
                break
        elapsed = time.perf_counter() - start
        await stream.aclose()
        return elapsed

    def ttfc(session: Session) -> tuple[float, float]:
        m = session.medians(
            {"ours": ours_first, "anchor": anchor_first}, {"ours": reset, "anchor": reset}, self_timed=True
        )
        return m["ours"] * 1e6, m["anchor"] * 1e6

    def per_chunk(session: Session) -> tuple[float, float]:
        m = session.medians({"ours": ours, "anchor": anchor}, {"ours": reset, "anchor": reset})
        return m["ours"] / CHUNKS * 1e6, m["anchor"] / CHUNKS * 1e6

    event: ToolEvent = {"kind": "tool", "phase": "start", "tool_name": "add", "id": "call_1", "args": {"a": 2, "b": 3}}
    sample_chunks: list[Any] = [f"word{i} " for i in range(9)] + [event]
    batch = sample_chunks * (ENCODES // len(sample_chunks))

    def encode_ours() -> None:
        for chunk in batch:
            encode_chunk(chunk)

    def encode_anchor() -> None:
        for chunk in batch:
            orjson.dumps(chunk)

    def per_encode(session: Session) -> tuple[float, float]:
        m = session.medians({"ours": encode_ours, "anchor": encode_anchor})
        return m["ours"] / len(batch) * 1e6, m["anchor"] / len(batch) * 1e6

    return [
        Metric(
            "stream µs/chunk: Agent.astream+encode_chunk / astream(messages)+orjson",
            measure=per_chunk,
            target=1.15,
            unit="µs/chunk",
            note=f"{CHUNKS}-word answer, no checkpointer, same model and tool; per chunk = whole run / {CHUNKS}.",
        ),
        Metric(
            "stream time to first chunk: Agent.astream / astream(messages)",
            measure=ttfc,
            target=1.20,
            unit="µs",
            note="from the call to the first encoded text line; the stream is closed afterwards (untimed).",
        ),
        *encoder_metrics(event, batch),
        Metric(
            "encode_chunk / orjson.dumps",
            measure=per_encode,
            target=3.0,
            unit="µs",
            note="9 text chunks + 1 tool event, per chunk; encode_chunk adds the newline and the fallback.",
        ),
        _actions_metric(),
    ]


def _route_lines(chunks: list[Any], encoder: type[UIEncoder] | None) -> Any:
    """A sample: the route's line generator over ``chunks`` (NDJSON when ``encoder`` is None)."""

    async def source() -> Any:
        for chunk in chunks:
            yield chunk

    async def sample() -> None:
        lines = andjson_lines(source()) if encoder is None else aencode_events(encoder(), source())
        async for _line in lines:
            pass

    return sample


def encoder_metrics(start: ToolEvent, mixed: list[Any]) -> list[Metric]:
    """AG-UI and Vercel AI vs NDJSON per chunk: a turn (gated), and a tool call every 10 chunks (report only)."""
    end: ToolEvent = {
        "kind": "tool",
        "phase": "end",
        "tool_name": "add",
        "id": "call_1",
        "output": "5",
        "status": "success",
    }
    turn: list[Any] = [start, end, *(f"{word} " for word in LONG_REPLY.split())]
    rows = []
    for name, encoder in (("AG-UI", AgUiEncoder), ("Vercel AI", VercelEncoder)):
        rows.append(
            Metric(
                f"{name} encoder µs/chunk / NDJSON encoder (route line generators)",
                ours=_route_lines(turn, encoder),
                anchor=_route_lines(turn, None),
                target=1.3,
                note="a turn: one tool call (start, end) and a 200-word answer.",
            )
        )
        rows.append(
            Metric(
                f"{name} encoder µs/chunk / NDJSON encoder, a tool call every 10 chunks",
                ours=_route_lines(mixed, encoder),
                anchor=_route_lines(mixed, None),
                target=None,
                note="report only: a tool start is several events (AG-UI: close the text, start, args, end) and the "
                "text part is reopened after it.",
            )
        )
    return rows


def _actions_metric() -> Metric:
    """The actions agent's stream against the plain Agent's: the same turn and the same 200 text chunks.

    The actions run adds its middleware (a system prompt with the actor's actions, the reply's directives parsed
    and validated) and the chunk adapter's line filter on every text chunk.
    """
    actions_model, plain_model = scripted_model(LONG_REPLY), scripted_model(LONG_REPLY)
    registry = ActionRegistry([define_action(id="ticket.summarize", description="Summarize a ticket.", risk="safe")])
    actions_agent = Agent(llm=actions_model, tools=[add], actions=registry)
    plain_agent = Agent(llm=plain_model, tools=[add])

    def reset() -> None:
        forget_calls(actions_model)
        forget_calls(plain_model)

    async def with_actions() -> None:
        lines = [encode_chunk(chunk) async for chunk in actions_agent.astream(PLAIN_PROMPT, actor={"user_id": "u"})]
        assert len(lines) == CHUNKS, len(lines)

    async def plain() -> None:
        lines = [encode_chunk(chunk) async for chunk in plain_agent.astream(PLAIN_PROMPT)]
        assert len(lines) == CHUNKS, len(lines)

    def per_chunk(session: Session) -> tuple[float, float]:
        m = session.medians({"ours": with_actions, "anchor": plain}, {"ours": reset, "anchor": reset})
        return m["ours"] / CHUNKS * 1e6, m["anchor"] / CHUNKS * 1e6

    return Metric(
        "actions agent stream µs/chunk: Agent(actions=...).astream / Agent.astream (report)",
        measure=per_chunk,
        target=None,
        unit="µs/chunk",
        note=f"{CHUNKS}-word answer, same model and tool, no checkpointer; the actions run adds its middleware "
        "(system prompt with the actor's actions, directive parsing and validation) and the line filter per chunk.",
    )
