"""Chain: a prompt plus a pydantic output model gives validated, typed results (with automatic retries).

Offline a scripted model first answers with invalid JSON (the chain sends the validation error back and
retries), then with a valid brief. With OPENROUTER_API_KEY set the real model writes the brief.
Run: `.venv/bin/python examples/chain_structured.py`
"""

from __future__ import annotations

import os

from pydantic import BaseModel, Field

from ai_utils import Chain, get_llm
from ai_utils.testing import FakeChatModel


class Brief(BaseModel):
    title: str = Field(description="A catchy product name")
    audience: str = Field(description="Who buys it")
    benefits: list[str] = Field(description="Three short benefits")


def pick_llm() -> object:
    if os.environ.get("OPENROUTER_API_KEY"):
        print("(real provider via get_llm())")
        return get_llm()
    print("(offline: scripted model; set OPENROUTER_API_KEY for the real one)")
    return FakeChatModel(
        [
            '{"title": "NoteAI"}',  # missing fields -> the chain retries with the validation error
            '{"title": "NoteAI", "audience": "Remote teams", "benefits": ["fast search", "shared", "GDPR-safe"]}',
        ]
    )


def main() -> None:
    chain = Chain(
        llm=pick_llm(),  # type: ignore[arg-type]
        prompt="You are a product marketer. Write a brief for {product} in the {market} market.",
        output=Brief,
    )
    brief = chain.invoke({"product": "AI notes for teams", "market": "DACH SaaS"})
    print(f"\n{type(brief).__name__}: title={brief.title!r}")
    print(f"  audience: {brief.audience}")
    for benefit in brief.benefits:
        print(f"  - {benefit}")


if __name__ == "__main__":
    main()
