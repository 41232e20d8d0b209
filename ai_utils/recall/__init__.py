"""Typed long-term memory and knowledge ingestion on LangGraph's `BaseStore` (SPEC §22; seed: polpo "Typed Memory").

```python
from langgraph.store.memory import InMemoryStore

from ai_utils import MemoryItemStore, MemoryScope, create_memory_item

memory = MemoryItemStore(InMemoryStore(), namespace="support-bot")
alice = MemoryScope("user", "alice@example.com")
memory.add(create_memory_item(scope=alice, kind="preference", content="Prefers concise answers.",
                              provenance={"source": "explicit", "actor": "user"}))
memory.search("answer style", scopes=[alice])
```

- `MemoryItem`, `MemoryScope`, `create_memory_item`: the typed record; exact duplicates are stored once.
- `MemoryItemStore`: add / get / update / forget (soft) / list_page (keyset, filter-bound cursors) / search
  (lexical + semantic, fused by reciprocal rank), each with an async twin.
- `can_access_memory_scope`, `memory_tools` (the model's tools, scope fixed by the host), `memory_context`.
- `KnowledgeJobs`: a claim/lease/retry ingestion queue on the same store.
"""

from __future__ import annotations

from ai_utils.recall._context import amemory_context, memory_context
from ai_utils.recall._identity import SemanticMode
from ai_utils.recall._items import MemoryItem, MemoryKind, MemoryProvenance, MemoryScope, create_memory_item
from ai_utils.recall._jobs import JobState, KnowledgeJob, KnowledgeJobLostError, KnowledgeJobs
from ai_utils.recall._scopes import can_access_memory_scope
from ai_utils.recall._store import MemoryItemStore
from ai_utils.recall._tools import MemoryGrant, WriteScope, memory_tools

__all__ = [
    "JobState",
    "KnowledgeJob",
    "KnowledgeJobLostError",
    "KnowledgeJobs",
    "MemoryGrant",
    "MemoryItem",
    "MemoryItemStore",
    "MemoryKind",
    "MemoryProvenance",
    "MemoryScope",
    "SemanticMode",
    "WriteScope",
    "amemory_context",
    "can_access_memory_scope",
    "create_memory_item",
    "memory_context",
    "memory_tools",
]
