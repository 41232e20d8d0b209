"""resolve_model_route's seed rules (§17): surface and invocation-source rules, pinned vs auto, the audit fields."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _services import Aimock

from ai_utils import (
    Gateway,
    ModelProfileError,
    ModelProfiles,
    Route,
    SqliteAuditSink,
    UserError,
    aresolve_model_route,
    get_llm,
    resolve_model_route,
)

PROFILES = ModelProfiles(
    {
        "fast": {"primary": "fallback-model", "hint": "Short, low-complexity requests."},
        "balanced": {"primary": "primary-model", "fallbacks": [{"profile": "fast"}], "hint": "Stronger reasoning."},
        "premium": "premium-model",
    }
)
ALLOWED = ["fast", "balanced"]
RULES = [
    {"id": "free-users", "profile": "fast", "when": {"all_labels": ["tier:free"]}},
    {"id": "channels", "profile": "fast", "when": {"surfaces": ["channel", "webhook"]}},
    {"id": "scheduled", "profile": "balanced", "when": {"invocation_source": "schedule"}},
    {"id": "eu-loops", "profile": "balanced", "when": {"anyLabels": ["region:eu"], "invocationSources": ["loop-step"]}},
]


class Classifier:
    """A host classifier that records what it was asked (and always answers ``balanced``)."""

    def __init__(self, answer: Any = ("balanced", 0.9)) -> None:
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.answer = answer

    def __call__(self, text: str, choices: dict[str, Any]) -> Any:
        self.asked.append((text, dict(choices)))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def route(text: Any, classifier: Classifier, **kwargs: Any) -> Any:
    options: dict[str, Any] = {
        "profiles": PROFILES,
        "allowed": ALLOWED,
        "rules": RULES,
        "fallback": "balanced",
        "classifier": classifier,
    }
    return resolve_model_route(text, **{**options, **kwargs})


@pytest.mark.parametrize(
    ("facts", "rule", "profile"),
    [
        ({"surface": "channel"}, "channels", "fast"),
        ({"surface": "webhook", "invocation_source": "request"}, "channels", "fast"),
        ({"surface": "agent", "invocation_source": "schedule"}, "scheduled", "balanced"),
        ({"surface": "task", "invocation_source": "loop-step", "labels": ["region:eu"]}, "eu-loops", "balanced"),
        ({"surface": "webhook", "labels": ["tier:free"]}, "free-users", "fast"),  # first match wins
    ],
)
def test_rules_match_surface_and_invocation_source_before_any_classifier(
    facts: dict[str, Any], rule: str, profile: str
) -> None:
    classifier = Classifier()
    result = route("Write me a detailed legal analysis.", classifier, **facts)
    assert (result.profile, result.reason, result.rule) == (profile, "rule", rule)
    assert (result.surface, result.invocation_source) == (facts.get("surface"), facts.get("invocation_source"))
    assert classifier.asked == []


def test_a_rule_needs_every_condition_it_names() -> None:
    classifier = Classifier()
    # eu-loops needs the label AND the loop-step source: either alone is not enough.
    assert route("hi there", classifier, invocation_source="loop-step").reason == "classifier"
    assert route("hi there", classifier, labels=["region:eu"]).reason == "classifier"
    assert route("hi there", classifier, surface="agent", invocation_source="request").reason == "classifier"
    assert len(classifier.asked) == 3
    # The classifier never learns the surface, the source or the labels: the text and the hints only.
    assert classifier.asked[0] == (
        "hi there",
        {"fast": "Short, low-complexity requests.", "balanced": "Stronger reasoning."},
    )


def test_pinned_mode_uses_the_configured_profile_without_rules_or_classifier() -> None:
    classifier = Classifier()
    pinned = route("Summarize this", classifier, mode="pinned", surface="channel", labels=["tier:free"])
    assert (pinned.profile, pinned.reason, pinned.mode, pinned.rule) == ("balanced", "pinned", "pinned", None)
    assert pinned.models == ["primary-model", "fallback-model"]
    # An explicit, authorized request still wins over the pin; one outside `allowed` still fails closed.
    assert route({"profile": "fast"}, classifier, mode="pinned").reason == "explicit"
    with pytest.raises(ModelProfileError, match="premium"):
        route({"profile": "premium"}, classifier, mode="pinned")
    assert classifier.asked == []
    # auto is the default (the existing behaviour).
    assert route("Summarize this", classifier).mode == "auto"


async def test_the_async_twin_takes_the_same_inputs() -> None:
    classifier = Classifier()
    result = await aresolve_model_route(
        "hello",
        profiles=PROFILES,
        allowed=ALLOWED,
        rules=RULES,
        fallback="balanced",
        classifier=classifier,
        surface="webhook",
    )
    assert (result.reason, result.rule) == ("rule", "channels")
    pinned = await aresolve_model_route("hello", profiles=PROFILES, allowed=ALLOWED, fallback="fast", mode="pinned")
    assert (pinned.profile, pinned.reason) == ("fast", "pinned")


def test_audit_fields_say_how_the_route_was_chosen_and_never_what_was_asked() -> None:
    ok = route("Summarize the incident report for the board", Classifier(("fast", 0.95)), surface="agent")
    assert ok.audit == {
        "profile": "fast",
        "models": ["fallback-model"],
        "reason": "classifier",
        "mode": "auto",
        "rule": None,
        "confidence": 0.95,
        "surface": "agent",
        "invocation_source": None,
        "fallback_used": False,
        "latency_ms": ok.audit["latency_ms"],
    }
    assert ok.audit["latency_ms"] >= 0 and "incident" not in json.dumps(ok.audit)
    failed = route("Summarize", Classifier(TimeoutError("provider hung")), invocation_source="request")
    assert (failed.reason, failed.fallback_used, failed.profile) == ("fallback", True, "balanced")
    skipped = route("", Classifier())  # nothing to decide: the fallback without a failed classifier
    assert (skipped.reason, skipped.fallback_used) == ("fallback", False)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "manual"}, "'pinned' or 'auto'"),
        ({"surface": ""}, "surface"),
        ({"surface": "agent\n"}, "surface"),
        ({"invocation_source": 42}, "invocation_source"),
        ({"invocation_source": "x" * 65}, "invocation_source"),
        ({"rules": [{"id": "r", "profile": "fast", "when": {"surfaces": []}}]}, "non-empty list"),
        ({"rules": [{"id": "r", "profile": "fast", "when": {"surface": ["channel", 3]}}]}, "strs"),
    ],
)
def test_bad_routing_input_is_a_clear_user_error(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        route("hi", Classifier(), **kwargs)


def test_a_rule_cannot_select_a_profile_outside_allowed() -> None:
    rules = [{"id": "vip", "profile": "premium", "when": {"surfaces": ["agent"]}}]
    with pytest.raises(ModelProfileError, match="'premium'"):
        route("hi", Classifier(), rules=rules, surface="agent")


def test_the_route_lands_in_a_real_gateway_audit_row(aimock: Aimock, tmp_path: Path) -> None:
    aimock.add(
        {
            "match": {"model": "primary-model"},
            "response": {"error": {"message": "overloaded", "type": "server_error"}, "status": 503},
        },
        {"match": {"model": "fallback-model"}, "response": {"content": "Routed answer."}},
    )
    sink = SqliteAuditSink(tmp_path / "audit.db")
    gateway = Gateway(routes=[Route("support", "local", "balanced")], audit=sink, enforce_actor=False)

    for facts in ({"surface": "webhook", "invocation_source": "request"}, {"mode": "pinned"}):
        chosen = route("Summarize this short update.", Classifier(), **facts)
        llm = get_llm("local", profile=chosen.profile, profiles=PROFILES, base_url=aimock.openai_base_url)
        llm.callbacks = [gateway.callback("support", metadata={"model_route": chosen.audit})]
        assert llm.invoke("Summarize this short update.").content == "Routed answer."

    rows = SqliteAuditSink(tmp_path / "audit.db").read()  # reopened, as an auditor reads it
    routes = [(r["status"], r["model"], r["metadata"]["model_route"]) for r in rows]
    webhook, pinned = routes[0][2], routes[-1][2]
    assert routes[0][:2] == ("succeeded", "fallback-model")
    assert (webhook["reason"], webhook["rule"], webhook["surface"], webhook["invocation_source"]) == (
        "rule",
        "channels",
        "webhook",
        "request",
    )
    # The pinned route ran on `balanced`: its primary failed (503), its fallback answered; each row names its model.
    assert [(s, m) for s, m, _ in routes[1:]] == [("failed", "primary-model"), ("succeeded", "fallback-model")]
    assert (pinned["reason"], pinned["mode"], pinned["profile"]) == ("pinned", "pinned", "balanced")
    with sqlite3.connect(tmp_path / "audit.db") as db:
        (table,) = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchone()
        stored = [json.loads(m) for (m,) in db.execute(f'SELECT metadata FROM "{table}"')]
    assert [m["model_route"]["reason"] for m in stored] == ["rule", "pinned", "pinned"]
    assert "Summarize" not in json.dumps([m["model_route"] for m in stored])  # never the request text
