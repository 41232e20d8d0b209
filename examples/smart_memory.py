"""SmartCheckpointSaver: a long conversation stays within budget — one rolling summary plus the last messages.

Twelve turns are sent to an Agent whose memory summarizes once enough messages piled up; the model then sees
the summary and the recent messages, while the full raw history is still kept. Offline the agent and the
summarizer are scripted; with OPENROUTER_API_KEY set both use the real model.
Run: `.venv/bin/python examples/smart_memory.py`
"""

from __future__ import annotations

import os

from langgraph.checkpoint.memory import InMemorySaver

from ai_utils import Agent, SmartCheckpointSaver, get_llm, get_messages_array_from_checkpoint
from ai_utils.testing import FakeChatModel, static_model

REAL = bool(os.environ.get("OPENROUTER_API_KEY"))
FACTS = ["Ich heisse Max.", "Ich wohne in Köln.", "Ich trinke gern Espresso.", "Ich arbeite als Tischler."]


def main() -> None:
    print("(real provider via get_llm())" if REAL else "(offline: scripted models; set OPENROUTER_API_KEY)")
    summarizer = get_llm() if REAL else static_model("Max, Tischler aus Köln, mag Espresso; plaudert über Alltag.")
    memory = SmartCheckpointSaver(
        InMemorySaver(),  # or sqlite_saver(path) / postgres_saver(...) to survive restarts
        llm=summarizer,
        max_tokens=2_000,
        messages_before_summary=8,
        keep_last_messages=4,
    )
    llm = get_llm() if REAL else FakeChatModel(["Verstanden."], cycle=True)
    agent = Agent(llm=llm, prompt="Antworte in einem kurzen Satz.", checkpointer=memory)
    config = {"configurable": {"thread_id": "max"}}

    for turn in range(12):
        message = FACTS[turn] if turn < len(FACTS) else f"Erzähl mir Nummer {turn} über den Alltag."
        agent.invoke(message, thread_id="max")
        stored = get_messages_array_from_checkpoint(memory.get_tuple(config), saver=memory)
        raw = memory.get_raw_history(config)
        print(f"turn {turn + 1:>2}: the model sees {len(stored):>2} messages, raw history has {len(raw):>2}")

    first = get_messages_array_from_checkpoint(memory.get_tuple(config), saver=memory)[0]
    print(f"\nfirst message the model sees now:\n  {first.type}: {first.text[:120]}")


if __name__ == "__main__":
    main()
