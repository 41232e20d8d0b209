"""get_llm: one call for a chat model from any provider, streamed chunk by chunk.

Offline it uses the scripted "fake" provider; with OPENROUTER_API_KEY set it streams from the real
default model (openrouter, openai/gpt-5.6-luna). Run: `.venv/bin/python examples/get_llm_basics.py`
"""

from __future__ import annotations

import os

from ai_utils import get_llm, log_chunk

# Other providers, same call (each needs its key or server):
#   get_llm("openai", "gpt-5.6-luna", temperature=0.2)   # OPENAI_API_KEY
#   get_llm("openrouter", reasoning="high")               # reasoning streams separately
#   get_llm("openrouter", data_safe=True)                 # no data collection, zero retention
#   get_llm("local", "llama3.2:3b")                       # Ollama / any OpenAI-compatible server
#   get_llm("claude-cli")                                 # the logged-in `claude` CLI


def main() -> None:
    if os.environ.get("OPENROUTER_API_KEY"):
        print("(real provider: get_llm())")
        llm = get_llm()
    else:
        print("(offline: get_llm('fake', responses=...); set OPENROUTER_API_KEY for the real model)")
        llm = get_llm(
            "fake", responses=["Hallo! Ich bin ein geskriptetes Modell und streame Wort für Wort.", "Hallo nochmal!"]
        )
    question = "Stell dich in einem Satz vor."
    print(f"You: {question}\nAssistant: ", end="")
    for chunk in llm.stream(question):
        log_chunk(chunk.text)
    print()
    answer = llm.invoke(question)
    print(f"invoke() returned an {type(answer).__name__} with {len(answer.text)} characters")


if __name__ == "__main__":
    main()
