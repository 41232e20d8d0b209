"""SmartCheckpointSaver (issue 4, reference/performance.md metrics 2-4): pass-through, flatness, token economy.

1. Pass-through: ``SmartCheckpointSaver(inner).aput`` / ``.aget_tuple`` vs ``inner``'s (an `InMemorySaver`)
   on a real 100-message thread under budget. The thread is built by running the graph through the smart
   saver (so its per-thread counters are exact, as in production); the sample re-puts the turn's last
   checkpoint with the arguments LangGraph passed, into the same inner saver on both sides.
2. Flatness: one thread with summarizing on (B = 8000 tokens, K = 6 kept messages), an `Agent` on a
   zero-latency `FunctionChatModel` (a tool call every other turn, ~300-token messages) and a
   `FunctionChatModel` summarizer returning a fixed ~200-word summary. Median turn time of turns 500-510
   / median of turns 10-20 (gc collected and frozen before every timed turn, untimed).
3. Token economy over 200 turns of the same conversation: tokens sent to the main model plus to the
   summarizer, counted with the saver's own `estimate_tokens`, vs the analytic model below; summarizer
   calls vs predicted; and (report) vs the naive run without a summarizing saver.
4. `SupabaseCheckpointSaver` vs `postgres_saver` put / get_tuple on the same Postgres server (≤ 2.0)
   (PostgREST started from tests/_supabase.py), a 20-message checkpoint; and (report) the stack's floor, a
   request to a no-op SQL function through the same client, gateway stand-in and PostgREST.

``messages_before_summary`` is set out of reach in 2 and 3, so the token budget alone triggers summaries
(the analytic model is about B, K and s).

Analytic model (token economy). Sizes, in `estimate_tokens` units: human message h, answer a, tool-call
AI message c, tool result r, summary message s (header + the fixed summary text). Turns alternate: even
turns are plain (h, a; one model call), odd turns use the tool (h, c, r, a; two model calls). Let x_t be
the tokens of the stored context before turn t (x_0 = 0). Then

    sent_t  = x_t + h                                   (plain turn)
    sent_t  = (x_t + h) + (x_t + h + c + r)             (tool turn)
    y_t     = x_t + u_t,   u_t = h + a  or  h + c + r + a
    if y_t > B:  one summarizer call with input  y_t - T_t  (the old summary plus the folded messages),
                 x_{t+1} = s + T_t
    else:        x_{t+1} = y_t

where T_t is the kept tail: the last K user/AI messages of the context with their tool results (for
K = 6 it always holds two answers and one tool turn, so T = 2h + 3a + c + r or 3h + 2a + 2c + 2r
depending on the parity of t). Between summaries the context grows linearly from x0 = s + T by ū per
turn (ū = (2h + 2a + c + r) / 2), so a cycle lasts n ≈ (B - x0) / ū turns, sends about
n·(x0 + h + ū·(n - 1)/2) + n/2·(x0 + 2h + c + r + ū·(n - 1)/2) tokens and makes one summarizer call of about
B - T tokens; 200 turns make ≈ (200 - n_0) / n cycles after the first n_0 ≈ B / ū turns. The code
evaluates the recurrence turn by turn (exact for the alternation). It leaves out the summarizer's
instruction prompt (a constant per call), which the measured total includes. The naive total is the
same recurrence with B = ∞: Σ_t sent_t with x_t = Σ_{i<t} u_i (quadratic in the turns).
"""

from __future__ import annotations

import atexit
import functools
import gc
import itertools
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from _fixtures import TESTS, history
from _harness import Metric, Session
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ai_utils import Agent
from ai_utils.memory import SmartCheckpointSaver
from ai_utils.memory._summary import _HEADER
from ai_utils.memory._tool_units import estimate_tokens
from ai_utils.testing import FunctionChatModel

BUDGET = 8_000
KEEP = 6
NEVER = 1_000_000  # messages_before_summary out of reach: the token budget alone triggers
ECONOMY_TURNS = 200
EARLY = range(10, 21)
LATE = range(500, 511)
FILL = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
SUMMARY = " ".join(f"fact{i:03d}" for i in range(200))  # a fixed 200-word summary


def _text(tag: str, chars: int = 1_200) -> str:
    """``chars`` characters (~300 tokens) starting with ``tag``; the length never depends on the tag."""
    return (tag + " " + FILL * (chars // len(FILL) + 1))[:chars]


RESULT = _text("result")
ANSWER = _text("answer")


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return RESULT


def _prompt(turn: int) -> str:
    return _text(f"lookup {turn:06d}" if turn % 2 else f"plain {turn:06d}")


class Counter:
    """Tokens and calls a FunctionChatModel received (counted with the saver's estimator)."""

    def __init__(self) -> None:
        self.tokens = 0
        self.calls = 0

    def add(self, messages: list[BaseMessage]) -> None:
        self.calls += 1
        self.tokens += sum(estimate_tokens(m) for m in messages)


def _main_model(counter: Counter | None = None) -> FunctionChatModel:
    ids = itertools.count()

    def answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        if counter is not None:
            counter.add(messages)
        last = messages[-1]
        if isinstance(last, HumanMessage) and last.text.startswith("lookup"):
            # Unique ids, as providers give: `forget` restarts the fake's call numbers, and with them its
            # generated ids (a repeated id would tie each ToolMessage to the first call that used it).
            return {
                "tool_calls": [{"name": "lookup", "args": {"query": last.text[:13]}, "id": f"call_{next(ids):06d}"}]
            }
        return ANSWER

    return FunctionChatModel(answer)


def _summarizer(counter: Counter | None = None) -> FunctionChatModel:
    def summarize(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> str:
        if counter is not None:
            counter.add(messages)
        return SUMMARY

    return FunctionChatModel(summarize)


def _forget(*models: FunctionChatModel) -> None:
    for model in models:
        model._calls.clear()  # the call log keeps every call's messages alive


# ----------------------------------------------------------------------------------------------- 1. pass-through


class _Recorder(InMemorySaver):
    """An InMemorySaver that remembers the arguments of the last put (what LangGraph passed)."""

    last: tuple[Any, ...] = ()

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.last = (config, checkpoint, metadata, new_versions)
        return await super().aput(config, checkpoint, metadata, new_versions)


@dataclass
class PassThrough:
    smart: SmartCheckpointSaver
    inner: _Recorder
    put_args: tuple[Any, ...]
    config: Any


@functools.cache
def _pass_through(kind: str, messages: int = 100) -> PassThrough:
    """A real ``messages``-message thread built through the smart saver (plain create_agent or our Agent)."""
    import asyncio

    inner = _Recorder()
    smart = SmartCheckpointSaver(inner, llm=_summarizer(), max_tokens=10**9, messages_before_summary=NEVER)
    model = _main_model()
    text = _text("message", 400)
    config: Any = {"configurable": {"thread_id": "t"}}

    async def build() -> None:
        if kind == "plain":
            graph = create_agent(model, [lookup], checkpointer=smart)
            first: Any = {"messages": history(messages - 3, text=text)}  # ends with a question: 98 after it
            await graph.ainvoke(first, config)
            last: Any = {"messages": [HumanMessage(text)]}
            await graph.ainvoke(last, config)
        else:
            agent = Agent(llm=model, tools=[lookup], checkpointer=smart)
            for _ in range(messages // 2):
                await agent.ainvoke(text, thread_id="t")

    asyncio.run(build())
    _forget(model)
    return PassThrough(smart, inner, inner.last, config)


def _put_metric(kind: str, label: str) -> Metric:
    async def ours() -> None:
        s = _pass_through(kind)
        await s.smart.aput(*s.put_args)

    async def anchor() -> None:
        s = _pass_through(kind)
        await s.inner.aput(*s.put_args)

    return Metric(
        f"memory: SmartCheckpointSaver.aput / InMemorySaver.aput (100 msgs, under budget, {label})",
        ours,
        anchor,
        1.05,
        note=f"{label}: the turn's last checkpoint re-put with LangGraph's arguments into the same inner saver.",
        ours_setup=functools.partial(_pass_through, kind),  # builds the thread (untimed, once)
        anchor_setup=functools.partial(_pass_through, kind),
    )


def _get_metric(kind: str, label: str) -> Metric:
    async def ours() -> None:
        s = _pass_through(kind)
        await s.smart.aget_tuple(s.config)

    async def anchor() -> None:
        s = _pass_through(kind)
        await s.inner.aget_tuple(s.config)

    return Metric(
        f"memory: SmartCheckpointSaver.aget_tuple / InMemorySaver.aget_tuple (100 msgs, {label})",
        ours,
        anchor,
        1.05,
        note=f"{label}: the latest checkpoint of the 100-message thread.",
        ours_setup=functools.partial(_pass_through, kind),
        anchor_setup=functools.partial(_pass_through, kind),
    )


# ----------------------------------------------------------------------------------------------- 2. flatness


def _summarizing_agent(main: FunctionChatModel, summarizer: FunctionChatModel) -> Agent:
    saver = SmartCheckpointSaver(
        InMemorySaver(), llm=summarizer, max_tokens=BUDGET, keep_last_messages=KEEP, messages_before_summary=NEVER
    )
    return Agent(llm=main, tools=[lookup], checkpointer=saver)


def _flatness(session: Session) -> tuple[float, float]:
    main, summarizer = _main_model(), _summarizer()
    agent = _summarizing_agent(main, summarizer)
    times: dict[int, float] = {}
    turn = 0

    async def one_turn() -> None:
        await agent.ainvoke(_prompt(turn), thread_id="flat")

    for turn in range(LATE.stop):
        timed = turn in EARLY or turn in LATE
        if timed:
            gc.collect()
            gc.freeze()
            start = time.perf_counter()
        session.run(one_turn)
        if timed:
            times[turn] = time.perf_counter() - start
            gc.unfreeze()
        _forget(main, summarizer)
    early = statistics.median(times[t] for t in EARLY)
    late = statistics.median(times[t] for t in LATE)
    return late * 1e3, early * 1e3


# ----------------------------------------------------------------------------------------------- 3. token economy


@dataclass(frozen=True)
class Economy:
    tokens: int
    calls: int


def _sizes() -> dict[str, int]:
    call = AIMessage("", tool_calls=[{"name": "lookup", "args": {"query": _prompt(1)[:13]}, "id": "call_000000"}])
    return {
        "h": estimate_tokens(HumanMessage(_prompt(0))),
        "a": estimate_tokens(AIMessage(ANSWER)),
        "c": estimate_tokens(call),
        "r": estimate_tokens(ToolMessage(RESULT, tool_call_id="call_x")),
        "s": estimate_tokens(SystemMessage(_HEADER + SUMMARY)),
    }


def predict(turns: int, budget: float, keep: int) -> Economy:
    """The analytic model of the module docstring, evaluated turn by turn."""
    z = _sizes()
    context: list[tuple[int, bool]] = []  # (tokens, is a user/AI message) of the stored context
    sent = calls = 0
    for turn in range(turns):
        x = sum(tokens for tokens, _ in context)
        if turn % 2:
            sent += (x + z["h"]) + (x + z["h"] + z["c"] + z["r"])
            context += [(z["h"], True), (z["c"], True), (z["r"], False), (z["a"], True)]
        else:
            sent += x + z["h"]
            context += [(z["h"], True), (z["a"], True)]
        if sum(tokens for tokens, _ in context) > budget:
            cut, seen = len(context), 0
            while cut > 0 and seen < keep:
                cut -= 1
                seen += context[cut][1]
            calls += 1
            sent += sum(tokens for tokens, _ in context[:cut])  # summarizer input: old summary + folded messages
            context = [(z["s"], False), *context[cut:]]
    return Economy(sent, calls)


def _simulate(turns: int, *, summarizing: bool) -> Economy:
    import asyncio

    counter = Counter()
    main, summarizer = _main_model(counter), _summarizer(counter)
    agent = (
        _summarizing_agent(main, summarizer)
        if summarizing
        else Agent(llm=main, tools=[lookup], checkpointer=InMemorySaver())
    )

    async def run() -> None:
        for turn in range(turns):
            await agent.ainvoke(_prompt(turn), thread_id="economy")
            _forget(main, summarizer)

    asyncio.run(run())
    return Economy(counter.tokens, counter.calls)


@functools.cache
def _economy() -> tuple[Economy, Economy, Economy, int]:
    """(measured main+summarizer, predicted, naive measured, measured summarizer calls)."""
    import asyncio

    main_counter, summary_counter = Counter(), Counter()
    main, summarizer = _main_model(main_counter), _summarizer(summary_counter)
    agent = _summarizing_agent(main, summarizer)

    async def run() -> None:
        for turn in range(ECONOMY_TURNS):
            await agent.ainvoke(_prompt(turn), thread_id="economy")
            _forget(main, summarizer)

    asyncio.run(run())
    measured = Economy(main_counter.tokens + summary_counter.tokens, summary_counter.calls)
    naive = _simulate(ECONOMY_TURNS, summarizing=False)
    return measured, predict(ECONOMY_TURNS, BUDGET, KEEP), naive, summary_counter.calls


def _tokens_vs_model(session: Session) -> tuple[float, float]:
    measured, predicted, _, _ = _economy()
    return measured.tokens / 1e3, predicted.tokens / 1e3


def _calls_vs_model(session: Session) -> tuple[float, float]:
    measured, predicted, _, _ = _economy()
    return float(measured.calls), float(predicted.calls)


def _tokens_vs_naive(session: Session) -> tuple[float, float]:
    measured, _, naive, _ = _economy()
    return measured.tokens / 1e3, naive.tokens / 1e3


# ----------------------------------------------------------------------------------------------- 4. supabase


@contextmanager
def _backends() -> Iterator[tuple[Any, Any]]:
    """(SupabaseCheckpointSaver, postgres_saver) on one throwaway Postgres server."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import httpx
    from _services import start_postgres  # type: ignore[import-not-found]
    from _supabase import start_supabase  # type: ignore[import-not-found]
    from supabase import ClientOptions, create_client

    from ai_utils.memory import SupabaseCheckpointSaver, postgres_saver, supabase_checkpoints_sql

    with ExitStack() as stack:
        uri = stack.enter_context(start_postgres())
        supa = stack.enter_context(start_supabase(uri))
        # The floor row's request: a function that does nothing, reached the way the saver's requests are.
        noop = "create function bench_noop() returns int language sql as 'select 1';"
        supa.run_sql(noop + supabase_checkpoints_sql("bench_checkpoints"), wait_for="bench_checkpoints")
        supa.wait_for_table("bench_checkpoints_writes")
        http = stack.enter_context(httpx.Client(timeout=30))
        client = create_client(supa.url, supa.service_key, options=ClientOptions(httpx_client=http))
        pg = stack.enter_context(postgres_saver(supa.db_uri))
        yield SupabaseCheckpointSaver(client, table="bench_checkpoints"), pg


def _supabase_vs_postgres(op: str) -> Any:
    calls = itertools.count()

    def measure(session: Session) -> tuple[float, float]:
        # Each repeat measures afresh (the put and get rows share the k-th repeat's samples), on one stack.
        return _backend_times(session.rounds, next(calls))[op]

    return measure


@functools.cache
def _started_backends() -> tuple[Any, Any]:
    stack = ExitStack()
    savers = stack.enter_context(_backends())
    atexit.register(stack.close)
    return savers


@functools.cache
def _backend_times(rounds: int, repeat: int) -> dict[str, tuple[float, float]]:
    from langgraph.checkpoint.base import empty_checkpoint

    out: dict[str, tuple[float, float]] = {}
    supa, pg = _started_backends()
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": history(20, text=_text("message", 400))}
    checkpoint["channel_versions"] = {"messages": "00000000000000000000000000000001.0"}
    samples: dict[str, list[float]] = {"supa_put": [], "pg_put": [], "supa_get": [], "pg_get": [], "noop": []}
    configs: dict[str, Any] = {}
    for i in range(rounds + 2):
        gc.collect()
        start = time.perf_counter()
        supa._call("bench_noop", {}, "call a no-op function")
        noop = time.perf_counter() - start
        for name, saver in (("supa", supa), ("pg", pg)):
            cp: Any = {**checkpoint, "id": f"1ef{repeat:03d}{i:026d}"}
            config = {"configurable": {"thread_id": f"b{name}", "checkpoint_ns": ""}}
            gc.collect()
            start = time.perf_counter()
            configs[name] = saver.put(config, cp, {"source": "loop", "step": i}, dict(cp["channel_versions"]))
            put = time.perf_counter() - start
            gc.collect()
            start = time.perf_counter()
            saver.get_tuple(configs[name])
            get = time.perf_counter() - start
            if i >= 2:
                samples[f"{name}_put"].append(put)
                samples[f"{name}_get"].append(get)
        if i >= 2:
            samples["noop"].append(noop)
    for op in ("put", "get"):
        out[op] = (statistics.median(samples[f"supa_{op}"]) * 1e3, statistics.median(samples[f"pg_{op}"]) * 1e3)
    out["floor"] = (statistics.median(samples["noop"]) * 1e3, statistics.median(samples["pg_put"]) * 1e3)
    return out


def metrics() -> list[Metric]:
    out: list[Metric] = []
    for kind, label in (("plain", "create_agent state"), ("delta", "Agent DeltaChannel state")):
        out.append(_put_metric(kind, label))
        out.append(_get_metric(kind, label))
    out.append(
        Metric(
            f"memory: summarizing thread flatness: Agent turns {LATE.start}-{LATE.stop - 1} / turns "
            f"{EARLY.start}-{EARLY.stop - 1}",
            measure=_flatness,
            target=1.5,
            unit="ms",
            note=f"SmartCheckpointSaver(InMemorySaver, B={BUDGET}, K={KEEP}); ~300-token messages, a tool call every "
            "other turn, fixed 200-word summary; medians of 11 consecutive turns.",
        )
    )
    out.append(
        Metric(
            f"memory: token economy: tokens sent (main + summarizer) over {ECONOMY_TURNS} turns / analytic model",
            measure=_tokens_vs_model,
            target=1.10,
            unit="k tokens",
            note=f"B={BUDGET}, K={KEEP}, s = the summary message; tokens counted with the saver's estimate_tokens; "
            "the model is in the module docstring.",
        )
    )
    out.append(
        Metric(
            f"memory: token economy: summarizer calls over {ECONOMY_TURNS} turns / analytic model",
            measure=_calls_vs_model,
            target=1.25,
            unit="calls",
        )
    )
    out.append(
        Metric(
            f"memory: token economy: tokens sent with summarizing / naive full history ({ECONOMY_TURNS} turns, report)",
            measure=_tokens_vs_naive,
            target=None,
            unit="k tokens",
            note="naive: the same Agent on a plain InMemorySaver (whole history on every model call).",
        )
    )
    for op in ("put", "get"):
        name = "get_tuple" if op == "get" else op
        out.append(
            Metric(
                f"memory: SupabaseCheckpointSaver.{name} / postgres_saver.{name} (same Postgres)",
                measure=_supabase_vs_postgres(op),
                target=2.0,
                unit="ms",
                note="PostgREST 12 (tests/_supabase.py) on the tests' Postgres; a 20-message checkpoint per "
                "put, then get_tuple of it; sync API; both savers on one database, alternating; ours is one "
                "PostgREST /rpc request each through the tests' stand-in for Supabase's API gateway, which runs "
                "in its own node process as Kong does (tests/services/supabase_proxy.cjs; it used to be threads "
                "in this process, taking the GIL from the measured client); each repeat measures afresh.",
            )
        )
    out.append(
        Metric(
            "memory: floor: a PostgREST /rpc request to a no-op SQL function / postgres_saver.put (report)",
            measure=_supabase_vs_postgres("floor"),
            target=None,
            unit="ms",
            note="the Supabase rows' floor: `select 1` as a PostgREST function, sent as the saver sends its "
            "requests (same client, gateway stand-in and PostgREST), in the same rounds as the put/get rows; "
            "anchor: postgres_saver.put of the 20-message checkpoint. No saver over this stack can be faster.",
        )
    )
    return out
