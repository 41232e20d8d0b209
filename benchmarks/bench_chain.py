"""Chain.invoke vs the raw LangChain pipe doing the same work on the same fake model."""

from __future__ import annotations

from _harness import Metric
from langchain_core.prompts import ChatPromptTemplate
from pydantic import BaseModel

from ai_utils import Chain
from ai_utils.testing import static_model


class Brief(BaseModel):
    title: str
    audience: str
    benefits: list[str]


REPLY = '{"title": "NoteAI", "audience": "teams", "benefits": ["fast", "shared"]}'
INPUTS = {"product": "AI note app for teams", "market": "DACH SaaS"}


def metrics() -> list[Metric]:
    model = static_model(REPLY)
    chain = Chain(llm=model, prompt="You are a product marketing assistant.", output=Brief)
    raw = ChatPromptTemplate.from_messages(
        [("system", "You are a product marketing assistant."), ("human", "{text}")]
    ) | model.with_structured_output(Brief)
    text = "\n".join(f"{k}: {v}" for k, v in INPUTS.items())

    def ours() -> None:
        assert isinstance(chain.invoke(INPUTS), Brief)

    def anchor() -> None:
        assert isinstance(raw.invoke({"text": text}), Brief)

    return [
        Metric(
            "chain.invoke / prompt|with_structured_output",
            ours,
            anchor,
            target=1.10,
            note="Chain(output=Brief).invoke vs ChatPromptTemplate | model.with_structured_output(Brief), same model.",
        )
    ]
