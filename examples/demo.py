"""ai_utils in one minute: an agent streams its answer, calls a tool, and shows the result.

Runs offline with a scripted model. With OPENROUTER_API_KEY set, the same code talks to the real
provider through `get_llm()` (default model: openai/gpt-5.6-luna).
"""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field

from ai_utils import Agent, ToolRegistry, get_llm
from ai_utils.streaming import log_chunk
from ai_utils.testing import FakeChatModel

WEATHER = {"berlin": "sonnig, 21 °C", "hamburg": "Regen, 14 °C", "münchen": "bewölkt, 17 °C"}


class City(BaseModel):
    city: str = Field(description="Name of the city, e.g. Berlin")


def get_weather(city: str) -> str:
    return f"{city}: {WEATHER.get(city.lower(), 'keine Daten')}"


registry = ToolRegistry(
    [{"name": "get_weather", "description": "Current weather for a city.", "schema": City, "func": get_weather}]
)


def pick_model() -> BaseChatModel:
    if os.environ.get("OPENROUTER_API_KEY"):
        print("(using the real provider via get_llm())\n")
        return get_llm()
    print("(offline: scripted model; set OPENROUTER_API_KEY to use a real one)\n")
    return FakeChatModel(
        [
            {
                "reasoning": "The user wants the weather; I should call get_weather for Berlin.",
                "tool_calls": [{"name": "get_weather", "args": {"city": "Berlin"}}],
            },
            "In Berlin ist es gerade sonnig bei 21 °C – perfektes Wetter für einen Spaziergang!",
        ]
    )


def main() -> None:
    agent = Agent(
        llm=pick_model(),
        prompt="Du bist ein hilfreicher Assistent. Nutze Tools, wenn sie helfen.",
        tools=registry.all_tools,
    )
    question = "Wie ist das Wetter in Berlin?"
    print(f"You: {question}\nAssistant:")
    for chunk in agent.stream(question, show_tool_calls=True, show_reasoning=True):
        log_chunk(chunk)
    print()


if __name__ == "__main__":
    main()
