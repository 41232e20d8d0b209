"""resolve_model_route: explicit, rule, classifier (Jev, through the fake Jev server) and fallback."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator, Mapping

import pytest

from ai_utils import (
    ModelProfileError,
    ModelProfiles,
    ModelRoute,
    UserError,
    aresolve_model_route,
    get_llm,
    jev_route_classifier,
    resolve_model_route,
)
from ai_utils.testing import FakeJevServer

PROFILES = ModelProfiles(
    {
        "fast": {"primary": "openai/gpt-4o-mini", "hint": "Short, low-complexity requests."},
        "balanced": {
            "primary": "anthropic/claude-sonnet-4",
            "fallbacks": [{"profile": "fast"}],
            "hint": "Requests that need stronger reasoning.",
        },
        "premium": "openai/gpt-5",
    }
)
RULES = [{"id": "free-users", "profile": "fast", "when": {"all_labels": ["tier:free"]}}]
ALLOWED = ["fast", "balanced"]
PROVIDER_KEY = "sk-or-provider-secret-123"


@pytest.fixture
def jev(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeJevServer]:
    """The fake Jev server, wired in through the environment like a deployment would."""
    with FakeJevServer() as server:
        monkeypatch.setenv("JEV_BASE_URL", server.url)
        monkeypatch.setenv("OPENROUTER_API_KEY", server.api_key)
        monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        yield server


def route(input: object, **kwargs: object) -> ModelRoute:
    options: dict[str, object] = {"profiles": PROFILES, "allowed": ALLOWED, "rules": RULES, "fallback": "balanced"}
    options.update(kwargs)
    return resolve_model_route(input, **options)  # type: ignore[arg-type]


def test_an_explicit_allowed_profile_skips_all_automation(jev: FakeJevServer) -> None:
    assert route({"profile": "fast"}, labels=["tier:pro"]) == ModelRoute("fast", ["openai/gpt-4o-mini"], "explicit")
    assert jev.requests == []


def test_an_explicit_profile_outside_allowed_fails_closed(jev: FakeJevServer) -> None:
    with pytest.raises(ModelProfileError, match="'premium' is not in allowed") as err:
        route({"profile": "premium"})
    assert err.value.profile == "premium"


def test_rules_on_trusted_labels_decide_before_any_classifier(jev: FakeJevServer) -> None:
    result = route("Write me a detailed legal analysis.", labels=["tier:free", "region:eu"])
    assert result == ModelRoute("fast", ["openai/gpt-4o-mini"], "rule", None, "free-users")
    any_rule = [{"id": "eu", "profile": "balanced", "when": {"anyLabels": ["region:eu", "region:ch"]}}]
    assert route("hi", rules=any_rule, labels=["region:ch"]).reason == "rule"
    assert jev.requests == []


def test_the_classifier_picks_among_allowed_profiles_by_their_hints(jev: FakeJevServer) -> None:
    jev.answer("profile", choice="fast", confidence=0.92)
    result = route("Summarize this short update.", labels=["tier:pro"])
    assert (result.profile, result.models, result.reason, result.confidence) == (
        "fast",
        ["openai/gpt-4o-mini"],
        "classifier",
        0.92,
    )
    [request] = jev.requests
    assert request.body["state"] == {"input": "Summarize this short update."}
    [question] = request.body["questions"].values()
    assert question["type"] == "choice"
    assert question["criteria"] == {
        "fast": "Short, low-complexity requests.",
        "balanced": "Requests that need stronger reasoning.",
    }


def test_the_classifier_never_sees_history_tools_model_ids_labels_or_credentials(jev: FakeJevServer) -> None:
    jev.answer("profile", choice="balanced", confidence=0.9)
    assert route("Plan a database migration.", labels=["tier:pro", "user:42"]).profile == "balanced"
    raw = jev.requests[0].raw.decode()
    for secret in (
        "openai/gpt-4o-mini",
        "anthropic/claude-sonnet-4",
        "openai/gpt-5",
        "premium",
        PROVIDER_KEY,
        jev.api_key,
        "tier:pro",
        "user:42",
        "tools",
        "history",
        "message_history",
        "function",
    ):
        assert secret not in raw, secret
    assert set(json.loads(raw)) <= {"model", "state", "questions"}


def test_low_confidence_falls_back_and_reports_the_confidence(jev: FakeJevServer) -> None:
    jev.answer("profile", choice="fast", confidence=0.41)
    assert route("hmm", labels=[]) == ModelRoute(
        "balanced", ["anthropic/claude-sonnet-4", "openai/gpt-4o-mini"], "fallback", 0.41
    )
    jev.answer("profile", choice="fast", confidence=0.41)
    assert route("hmm", min_confidence=0.4).reason == "classifier"


def test_a_classifier_timeout_falls_back_without_raising(jev: FakeJevServer) -> None:
    jev.delay(2.0, times=1)
    started = time.monotonic()
    result = route("Summarize this.", classifier=jev_route_classifier(timeout=0.3))
    assert (result.profile, result.reason) == ("balanced", "fallback")
    assert time.monotonic() - started < 1.5


def test_a_classifier_error_falls_back_without_raising(jev: FakeJevServer, monkeypatch: pytest.MonkeyPatch) -> None:
    jev.fail(400)
    assert route("Summarize this.").reason == "fallback"
    jev.reply_raw("not json")
    assert route("Summarize this.").reason == "fallback"
    monkeypatch.delenv("OPENROUTER_API_KEY")  # no key: classify() refuses before any request
    assert route("Summarize this.").reason == "fallback"
    assert len(jev.requests) == 2


def _returns(answer: object) -> object:
    def classifier(text: str, choices: Mapping[str, str | None]) -> object:
        return answer

    return classifier


@pytest.mark.parametrize("answer", [("premium", 0.99), ("openai/gpt-5", 0.99), ("turbo", 1.0), None, ("fast", 7.0)])
def test_an_unknown_raw_or_malformed_answer_falls_back_never_to_a_raw_model_id(answer: object) -> None:
    result = route("anything", classifier=_returns(answer))
    assert (result.profile, result.reason) == ("balanced", "fallback")


def test_a_raising_custom_classifier_falls_back() -> None:
    def broken(text: str, choices: Mapping[str, str | None]) -> tuple[str, float]:
        raise RuntimeError("provider down")

    assert route("anything", classifier=broken).reason == "fallback"


def test_a_custom_classifier_gets_only_the_text_and_the_allowed_hints() -> None:
    seen: list[tuple[str, dict[str, str | None]]] = []

    def classifier(text: str, choices: Mapping[str, str | None]) -> tuple[str, float]:
        seen.append((text, dict(choices)))
        return "balanced", 0.8

    assert route("Refactor this module.", classifier=classifier).reason == "classifier"
    assert seen == [
        (
            "Refactor this module.",
            {"fast": "Short, low-complexity requests.", "balanced": "Requests that need stronger reasoning."},
        )
    ]


def test_missing_input_and_single_profile_allowlists_resolve_without_a_classifier(jev: FakeJevServer) -> None:
    assert route("   ").reason == "fallback"
    assert route(None).reason == "fallback"
    assert route("Summarize.", allowed=["fast"], fallback="fast") == ModelRoute(
        "fast", ["openai/gpt-4o-mini"], "fallback"
    )
    assert jev.requests == []


def test_bad_configuration_fails_closed() -> None:
    with pytest.raises(ModelProfileError, match="fallback profile 'premium' is not in allowed"):
        route("x", fallback="premium")
    with pytest.raises(ModelProfileError, match="unknown profile 'turbo'"):
        route("x", allowed=["fast", "turbo"])
    with pytest.raises(ModelProfileError, match="'free-users' selects 'premium'"):
        route("x", rules=[{"id": "free-users", "profile": "premium", "when": {"all_labels": ["a"]}}])
    with pytest.raises(UserError, match="no condition"):
        route("x", rules=[{"id": "r", "profile": "fast"}])
    with pytest.raises(UserError, match="min_confidence"):
        route("x", min_confidence=2)


async def test_the_async_twin_uses_aclassify_and_falls_back_on_timeout(jev: FakeJevServer) -> None:
    jev.answer("profile", choice="fast", confidence=0.95)
    result = await aresolve_model_route("Short one.", profiles=PROFILES, allowed=ALLOWED, fallback="balanced")
    assert (result.profile, result.reason) == ("fast", "classifier")

    async def slow(text: str, choices: Mapping[str, str | None]) -> tuple[str, float]:
        await asyncio.sleep(5)
        return "fast", 1.0

    result = await aresolve_model_route(
        "x", profiles=PROFILES, allowed=ALLOWED, fallback="balanced", classifier=slow, timeout=0.05
    )
    assert result.reason == "fallback"


async def test_cancelling_the_caller_stops_routing_instead_of_falling_back() -> None:
    started = asyncio.Event()

    async def slow(text: str, choices: Mapping[str, str | None]) -> tuple[str, float]:
        started.set()
        await asyncio.sleep(5)
        return "fast", 1.0

    task = asyncio.create_task(
        aresolve_model_route("x", profiles=PROFILES, allowed=ALLOWED, fallback="balanced", classifier=slow)
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_the_route_feeds_get_llm(jev: FakeJevServer) -> None:
    jev.answer("profile", choice="balanced", confidence=0.9)
    chosen = route("Plan a migration.")
    llm = get_llm("fake", profile=chosen.profile, profiles=PROFILES, responses=["planned"])
    assert llm.invoke("Plan a migration.").content == "planned"
    assert llm.model_ids == chosen.models  # type: ignore[attr-defined]


def test_a_langchain_decision_model_classifies_with_one_choice(jev: FakeJevServer) -> None:
    from ai_utils import JevDecisionModel

    jev.answer("profile", choice="fast", confidence=0.95)
    result = route("Short one.", classifier=JevDecisionModel(base_url=jev.url, api_key=jev.api_key))
    assert (result.profile, result.reason, result.confidence) == ("fast", "classifier", 0.95)
    [request] = jev.requests
    assert request.body["state"] == {"input": "Short one."}
    assert request.body["questions"]["profile"]["criteria"] == {
        "fast": "Short, low-complexity requests.",
        "balanced": "Requests that need stronger reasoning.",
    }


async def test_a_chat_model_classifies_by_label_logprobs_without_jev(jev: FakeJevServer) -> None:
    from ai_utils.testing import FakeChatModel

    llm = FakeChatModel([{"content": "B", "logprobs": {"A": -4.0, "B": -0.02}}] * 2)
    result = route("Plan a migration.", classifier=llm)
    assert (result.profile, result.reason) == ("balanced", "classifier")
    assert result.confidence is not None and result.confidence > 0.9
    again = await aresolve_model_route(
        "Plan a migration.", profiles=PROFILES, allowed=ALLOWED, fallback="fast", classifier=llm
    )
    assert again.profile == "balanced"
    assert jev.requests == []  # the chat model answered; Jev was never asked
    assert "Plan a migration." in llm.calls[0][-1].text and "openai/" not in str(llm.calls[0])


def test_a_classifier_may_answer_with_a_mapping() -> None:
    answer = {"profile": "fast", "confidence": 0.7}
    assert route("x", classifier=_returns(answer)).reason == "classifier"
    with pytest.raises(UserError, match="`classifier` must be"):
        route("x", classifier=42)
