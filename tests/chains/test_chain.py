from __future__ import annotations

import json
from datetime import date
from typing import Any, Literal

import pytest
from _services import Aimock
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.vectorstores import InMemoryVectorStore
from pydantic import BaseModel, Field

from ai_utils.chains import Chain
from ai_utils.exceptions import ModelOutputError, UserError
from ai_utils.testing import FakeChatModel


class ProductBrief(BaseModel):
    title: str = Field(description="Short product name")
    key_benefits: list[str]
    price_positioning: Literal["budget", "mid", "premium"]


BRIEF = {"title": "NoteAI", "key_benefits": ["fast", "shared"], "price_positioning": "mid"}


class Answer(BaseModel):
    output: str


def _store() -> InMemoryVectorStore:
    return InMemoryVectorStore(DeterministicFakeEmbedding(size=16))


def test_structured_chain_returns_a_validated_model_from_prompt_and_inputs() -> None:
    llm = FakeChatModel([json.dumps(BRIEF)])
    chain = Chain(llm=llm, prompt="You are a product marketer.", output=ProductBrief)

    result = chain.invoke({"product": "AI notes for teams", "market": "DACH SaaS"})

    assert result == ProductBrief(**BRIEF)
    system, human = llm.calls[0]
    assert isinstance(system, SystemMessage) and system.content.startswith("You are a product marketer.")
    assert "`ProductBrief`" in system.content
    assert isinstance(human, HumanMessage)
    assert human.content == "product: AI notes for teams\nmarket: DACH SaaS"


def test_non_string_inputs_are_rendered_as_json_and_thread_id_is_not_sent() -> None:
    llm = FakeChatModel(["ok"])
    chain = Chain(llm=llm)

    assert chain.invoke({"items": [1, {"a": "ü"}], "n": 3, "thread_id": "t-1"}) == "ok"

    (human,) = llm.calls[0]  # no prompt -> no system message
    assert human.content == 'items: [1, {"a": "ü"}]\nn: 3'


def test_models_and_other_objects_in_inputs_are_rendered_as_json() -> None:
    llm = FakeChatModel(["ok"])

    Chain(llm=llm).invoke({"answer": Answer(output="x"), "when": date(2026, 1, 2)})

    assert llm.calls[0][0].content == 'answer: {"output": "x"}\nwhen: "2026-01-02"'


def test_chain_without_output_returns_the_reply_text() -> None:
    chain = Chain(llm=FakeChatModel(["Hello there."]), prompt="Be brief.")

    assert chain.invoke({"question": "hi"}) == "Hello there."


def test_invalid_structured_reply_is_retried_with_the_validation_error() -> None:
    wrong = {**BRIEF, "price_positioning": "luxury"}
    llm = FakeChatModel([json.dumps(wrong), json.dumps(BRIEF)])
    chain = Chain(llm=llm, output=ProductBrief)

    assert chain.invoke({"product": "x"}) == ProductBrief(**BRIEF)
    assert len(llm.calls) == 2
    feedback = llm.calls[1][-1].content
    assert "price_positioning" in feedback and "luxury" in feedback


def test_structured_chain_raises_model_output_error_after_its_retries() -> None:
    llm = FakeChatModel(["{}", "{}"])
    chain = Chain(llm=llm, output=ProductBrief, retries=1)

    with pytest.raises(ModelOutputError) as caught:
        chain.invoke({"product": "x"})

    assert caught.value.attempts == 2
    assert "title" in caught.value.errors and "Field required" in caught.value.errors
    assert len(llm.calls) == 2


class _CountCalls(BaseCallbackHandler):
    def __init__(self) -> None:
        self.starts = 0

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.starts += 1


def test_config_callbacks_see_every_model_call_including_retries() -> None:
    handler = _CountCalls()
    chain = Chain(llm=FakeChatModel(["{}", json.dumps(BRIEF), "plain", "streamed text"]), output=ProductBrief)

    chain.invoke({"product": "x"}, {"callbacks": [handler]})
    assert handler.starts == 2

    plain = Chain(llm=chain.llm)
    plain.invoke({"q": "x"}, {"callbacks": [handler]})
    "".join(plain.stream({"q": "x"}, {"callbacks": [handler]}))
    assert handler.starts == 4


def test_stream_yields_several_chunks_that_join_to_the_reply() -> None:
    text = "Streaming works in several pieces for this chain."
    chain = Chain(llm=FakeChatModel([text]))

    chunks = list(chain.stream({"question": "explain"}))

    assert len(chunks) > 1
    assert "".join(chunks) == text


def test_stream_of_a_structured_chain_yields_the_raw_json_text() -> None:
    chain = Chain(llm=FakeChatModel([json.dumps(BRIEF)]), output=ProductBrief)

    assert json.loads("".join(chain.stream({"product": "x"}))) == BRIEF


async def test_async_twins_return_the_same_results() -> None:
    structured = Chain(llm=FakeChatModel(["{}", json.dumps(BRIEF)]), output=ProductBrief)
    plain = Chain(llm=FakeChatModel(["one two three four five six seven"]))

    assert await structured.ainvoke({"product": "x"}) == ProductBrief(**BRIEF)
    chunks = [chunk async for chunk in plain.astream({"question": "count"})]
    assert len(chunks) > 1 and "".join(chunks) == "one two three four five six seven"


async def test_async_invoke_without_output_returns_text() -> None:
    assert await Chain(llm=FakeChatModel(["done"])).ainvoke({"task": "x"}) == "done"


def test_chain_with_a_vector_store_sends_the_retrieved_document_to_the_model() -> None:
    store = _store()
    llm = FakeChatModel(['{"output": "Dokument C sagt: Hallo"}'])
    chain = Chain(llm=llm, prompt="Answer only from context.", output=Answer, vector_store=store, k=1)
    ids = chain.add_context(["Dokument C: Hallo", Document(page_content="Other", metadata={"s": 1})])

    answer = chain.invoke({"question": "Dokument C: Hallo"})

    assert len(ids) == 2
    assert answer == Answer(output="Dokument C sagt: Hallo")
    system = llm.calls[0][0].content
    assert system.startswith("Answer only from context.")
    assert "<context>\n[1] Dokument C: Hallo\n</context>" in system
    assert "Other" not in system  # k=1


def test_without_a_question_input_all_inputs_are_the_retrieval_query() -> None:
    store = _store()
    store.add_documents([Document(page_content="topic: cats\nlevel: 2"), Document(page_content="dogs")])
    llm = FakeChatModel(["answer"])

    Chain(llm=llm, vector_store=store, k=1).invoke({"topic": "cats", "level": 2})

    # DeterministicFakeEmbedding embeds equal texts equally, so the exact rendered inputs win.
    assert "[1] topic: cats\nlevel: 2" in llm.calls[0][0].content


async def test_async_retrieval_and_add_context_accept_mappings_with_metadata() -> None:
    store = _store()
    llm = FakeChatModel(["ok"])
    chain = Chain(llm=llm, vector_store=store, k=2)
    await chain.aadd_context({"page_content": "Paris is in France", "metadata": {"src": "atlas"}})

    assert await chain.ainvoke({"question": "Where is Paris?"}) == "ok"

    assert "[1] Paris is in France" in llm.calls[0][0].content
    (doc,) = store.similarity_search("Paris is in France", k=1)
    assert doc.metadata == {"src": "atlas"}


def test_add_context_without_a_vector_store_is_a_user_error() -> None:
    with pytest.raises(UserError, match="vector_store"):
        Chain(llm=FakeChatModel([])).add_context("text")


def test_add_context_rejects_unsupported_items() -> None:
    with pytest.raises(UserError, match="page_content"):
        Chain(llm=FakeChatModel([]), vector_store=_store()).add_context([42])


def test_inputs_must_be_a_non_empty_mapping() -> None:
    chain = Chain(llm=FakeChatModel([]), vector_store=_store())

    with pytest.raises(UserError, match="must be a mapping"):
        chain.invoke("just text")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="nothing to send"):
        chain.invoke({"thread_id": "t"})


def test_bad_constructor_arguments_are_user_errors() -> None:
    llm = FakeChatModel([])
    with pytest.raises(UserError, match="pydantic model class"):
        Chain(llm=llm, output=dict)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="k=4"):
        Chain(llm=llm, k=0)
    with pytest.raises(UserError, match="retries"):
        Chain(llm=llm, retries=-1)


def test_repr_names_model_and_output_but_no_prompt() -> None:
    chain = Chain(llm=FakeChatModel([]), prompt="secret instructions", output=Answer)

    assert repr(chain) == "Chain(llm=FakeChatModel, output=Answer, k=4, retries=2)"


def test_chain_without_llm_and_without_api_key_names_the_missing_key() -> None:
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        Chain()


def test_structured_chain_over_real_http_with_get_llm(aimock: Aimock) -> None:
    from ai_utils.llm import get_llm

    aimock.add({"match": {"userMessage": "AI notes"}, "response": {"content": json.dumps(BRIEF)}})
    llm = get_llm("openai", model="gpt-4o-mini", api_key="x", base_url=aimock.openai_base_url)
    chain = Chain(llm=llm, prompt="You are a product marketer.", output=ProductBrief)

    assert chain.invoke({"product": "AI notes for teams"}) == ProductBrief(**BRIEF)
    (body,) = aimock.request_bodies()
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][1] == {"role": "user", "content": "product: AI notes for teams"}
    assert body["response_format"]["json_schema"]["name"] == "ProductBrief"


def test_a_prompt_with_fields_is_a_template_filled_from_the_inputs() -> None:
    llm = FakeChatModel(["Hallo", "Hallo"])
    chain = Chain(llm=llm, prompt="Translate {text} to {lang}. Keep {{placeholders}}.")
    assert chain.invoke({"text": "hi", "lang": "German"}) == "Hallo"
    (human,) = llm.calls[0]
    assert human.text == "Translate hi to German. Keep {placeholders}."
    # an input the template does not name still reaches the model
    chain.invoke({"text": "hi", "lang": "German", "tone": "formal"})
    assert llm.calls[1][-1].text.endswith("\n\ntone: formal")


def test_a_missing_template_input_names_the_variable() -> None:
    chain = Chain(llm=FakeChatModel([]), prompt="Translate {text} to {lang}.")
    with pytest.raises(UserError, match="'lang'"):
        chain.invoke({"text": "hi"})


def test_a_json_example_prompt_is_sent_as_it_is_and_mixed_braces_are_refused() -> None:
    llm = FakeChatModel(["ok"])
    Chain(llm=llm, prompt='Reply like {"a": 1}.').invoke({"q": "x"})
    assert llm.calls[0][0].text == 'Reply like {"a": 1}.'
    with pytest.raises(UserError, match="literal braces"):
        Chain(llm=llm, prompt='About {topic}, reply like {"a": 1}.')
