"""Typed memory and context trust (issue 29): MemoryItemStore.search vs the store's own search; trust's turn tax.

1. ``MemoryItemStore.search`` (lexical BM25 + the store's semantic ranking, fused by rank, the top 10) over
   10,000 items of one user vs ``InMemoryStore.search(namespace, query=..., limit=10)`` on the same store, the
   same namespace and the same vector index (384-dimension deterministic fake embeddings: the embedding call
   costs the same on both sides, so the ratio is our layer's cost). Target ≤ 1.5.
2. An `Agent` tool turn (steps=1, H=10, the zero-latency `FunctionChatModel` and `add` tool of bench_agent)
   with ``context_trust="enforce"`` vs the same Agent with ``"off"``. Target ≤ 1.05.
"""

from __future__ import annotations

import functools
import random

from _fixtures import TOOL_PROMPT, ThreadStack, add, turn_metric
from _harness import Metric
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.memory import InMemoryStore

from ai_utils import Agent, MemoryItemStore, MemoryScope, create_memory_item
from ai_utils.recall._scopes import item_namespace

THREAD = "bench"
ITEMS = 10_000
QUERY = "w17 w230 w1450"


@functools.cache
def _memory() -> tuple[MemoryItemStore, InMemoryStore, MemoryScope]:
    store = InMemoryStore(index={"dims": 384, "embed": DeterministicFakeEmbedding(size=384), "fields": ["content"]})
    memory = MemoryItemStore(store, namespace="bench")
    scope = MemoryScope("user", "bench-user@example.com")
    words = [f"w{n}" for n in range(2_000)]
    rnd = random.Random(29)
    provenance = {"source": "imported", "actor": "bench"}
    for _ in range(ITEMS):
        text = " ".join(rnd.choices(words, k=rnd.randint(6, 12)))
        memory.add(create_memory_item(scope=scope, kind="fact", content=text, provenance=provenance))  # type: ignore[arg-type]
    return memory, store, scope


def _search_metric() -> Metric:
    memory, store, scope = _memory()
    namespace = item_namespace("bench", scope)
    assert len(store.search(namespace, limit=ITEMS + 1)) == ITEMS

    def ours() -> None:
        assert len(memory.search(QUERY, scopes=[scope])) == 10

    def anchor() -> None:
        assert len(store.search(namespace, query=QUERY, limit=10)) == 10

    return Metric(
        "MemoryItemStore.search N=10k (BM25 + semantic, RRF) / InMemoryStore.search (same index)",
        ours,
        anchor,
        target=1.5,
        rounds=15,
        note="10,000 items of one user in one InMemoryStore with a 384-d DeterministicFakeEmbedding index; ours "
        "reads every item once (the store's semantic search returns all of a namespace, scored), ranks BM25 "
        "over their stored terms and fuses the two top-30 lists by rank; the anchor is the store's top-10 "
        "semantic search on the same namespace.",
    )


class TrustStack(ThreadStack):
    """An Agent with the `add` tool on its own saver, ``context_trust`` on or off."""

    def __init__(self, context_trust: str, history: int) -> None:
        super().__init__(history)
        agent = Agent(llm=self.model, tools=[add], checkpointer=self.saver, context_trust=context_trust)  # type: ignore[arg-type]
        self.run = lambda prompt: agent.ainvoke(prompt, thread_id=THREAD)


@functools.cache
def _stack(context_trust: str, history: int) -> TrustStack:
    return TrustStack(context_trust, history)


def metrics() -> list[Metric]:
    return [
        _search_metric(),
        turn_metric(
            "Agent tool turn: context_trust='enforce' / 'off' (steps=1, H=10)",
            _stack("enforce", 10),
            _stack("off", 10),
            TOOL_PROMPT,
            1.05,
            "same FunctionChatModel and `add` tool, InMemorySaver; enforce wraps the tool result (trust_segment) "
            "in a wrap_tool_call hook and adds the rule to the static system prompt.",
        ),
    ]
