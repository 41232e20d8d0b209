from __future__ import annotations

from typing import Any

import pytest

from ai_utils.exceptions import ProviderError
from ai_utils.llm import get_llm
from ai_utils.llm._free import free_model, is_free, select_free_model

StubOpenRouter = Any  # tests/llm/conftest.py::StubOpenRouter


def _model(
    id: str,
    *,
    prompt: str = "0",
    completion: str = "0",
    context: int = 8192,
    created: int = 1_700_000_000,
    tools: bool = False,
) -> dict[str, Any]:
    return {
        "id": id,
        "name": id,
        "created": created,
        "context_length": context,
        "pricing": {"prompt": prompt, "completion": completion, "request": "0", "image": "0"},
        "supported_parameters": ["max_tokens", "temperature", *(["tools", "tool_choice"] if tools else [])],
    }


CATALOG = [
    _model("openai/gpt-5.6-luna", prompt="0.00000125", completion="0.00001", context=400_000, tools=True),
    _model("meta/llama-4:free", prompt="0.1", completion="0.1", context=131_072, tools=False),
    _model("qwen/qwen3-coder:free", context=262_144, tools=True, created=1_750_000_000),
    _model("mistral/devstral:free", context=262_144, tools=True, created=1_760_000_000),
    _model("google/gemma-4", context=96_000, tools=True),
    _model("x/half-free", prompt="0", completion="0.000002", context=1_000_000, tools=True),
    _model("big/no-tools:free", context=2_000_000, tools=False),
]


def test_is_free_accepts_free_suffix_or_zero_prices() -> None:
    assert is_free({"id": "a/b:free", "pricing": {"prompt": "1", "completion": "1"}})
    assert is_free({"id": "a/b", "pricing": {"prompt": "0", "completion": "0.0"}})
    assert not is_free({"id": "a/b", "pricing": {"prompt": "0", "completion": "0.000002"}})
    assert not is_free({"id": "a/b", "pricing": {"prompt": "-", "completion": None}})
    assert not is_free({"id": "a/b"})


def test_selection_prefers_tools_then_context_then_newest() -> None:
    # Tool calling beats a larger context; among free tool models the larger context wins, then the newer.
    assert select_free_model(CATALOG) == "mistral/devstral:free"
    assert select_free_model([m for m in CATALOG if m["id"] != "mistral/devstral:free"]) == "qwen/qwen3-coder:free"
    smaller = [m for m in CATALOG if m["id"] != "qwen/qwen3-coder:free"]
    smaller = [{**m, "context_length": 1000} if m["id"] == "mistral/devstral:free" else m for m in smaller]
    assert select_free_model(smaller) == "google/gemma-4"
    no_tools = [{**m, "supported_parameters": []} for m in CATALOG]
    assert select_free_model(no_tools) == "big/no-tools:free"


def test_selection_tolerates_odd_entries_and_reports_none_when_nothing_is_free() -> None:
    odd = [{"id": "a:free", "context_length": "big", "created": None}, "junk", {"pricing": {}}]
    assert select_free_model(odd) == "a:free"  # type: ignore[arg-type]
    assert select_free_model([CATALOG[0]]) is None
    assert select_free_model([]) is None


def test_free_model_is_fetched_once_per_process_and_base_url(stub_openrouter: StubOpenRouter) -> None:
    stub_openrouter.models = CATALOG

    first = free_model(stub_openrouter.base_url)
    stub_openrouter.models = [_model("other/new:free", tools=True, context=10**7)]
    second = free_model(stub_openrouter.base_url + "/")

    assert first == second == "mistral/devstral:free"
    assert stub_openrouter.model_requests == 1


def test_get_llm_free_uses_the_chosen_model_end_to_end(stub_openrouter: StubOpenRouter) -> None:
    stub_openrouter.models = CATALOG

    llm = get_llm("openrouter", free=True, data_safe=True, base_url=stub_openrouter.base_url, api_key="x")
    reply = llm.invoke("hi")
    get_llm("openrouter", free=True, base_url=stub_openrouter.base_url, api_key="x")

    assert reply.content == "hi from mistral/devstral:free"
    assert stub_openrouter.chat_bodies[0]["model"] == "mistral/devstral:free"
    assert stub_openrouter.chat_bodies[0]["provider"] == {"data_collection": "deny", "zdr": True}
    assert stub_openrouter.model_requests == 1


def test_free_reads_the_base_url_from_the_environment(
    stub_openrouter: StubOpenRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub_openrouter.models = CATALOG
    monkeypatch.setenv("OPENROUTER_BASE_URL", stub_openrouter.base_url)
    monkeypatch.setenv("OPENROUTER_API_KEY", "x")

    assert get_llm(free=True).invoke("hi").content == "hi from mistral/devstral:free"


def test_nothing_free_is_a_provider_error(stub_openrouter: StubOpenRouter) -> None:
    stub_openrouter.models = [CATALOG[0]]

    with pytest.raises(ProviderError, match="No free model is listed") as info:
        get_llm("openrouter", free=True, base_url=stub_openrouter.base_url, api_key="x")
    assert info.value.provider == "openrouter"


def test_http_error_status_is_a_provider_error(stub_openrouter: StubOpenRouter) -> None:
    stub_openrouter.models_status = 503

    with pytest.raises(ProviderError, match="failed with HTTP 503"):
        free_model(stub_openrouter.base_url)


def test_unreachable_server_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="Could not fetch the OpenRouter model list from 'http://127.0.0.1:9/"):
        free_model("http://127.0.0.1:9/api/v1", timeout=2)


def test_unexpected_json_is_a_provider_error(stub_openrouter: StubOpenRouter) -> None:
    stub_openrouter.models = {"not": "a list"}  # type: ignore[assignment]

    with pytest.raises(ProviderError, match="has no 'data' list"):
        free_model(stub_openrouter.base_url)
    stub_openrouter.models_raw = b"<html>maintenance</html>"
    with pytest.raises(ProviderError, match="not the expected JSON"):
        free_model(stub_openrouter.base_url + "/other")
