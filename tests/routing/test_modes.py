"""KeywordModeRouter, as the seed's README shows it and as SPEC §17 pins it down."""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from ai_utils import KeywordModeRouter, ModeDecision, ModeDefinition, UserError


def test_the_seed_example_routes_assess_my_symptoms_to_assessment(router: KeywordModeRouter) -> None:
    decision = router.resolve(
        "Can you assess my symptoms?",
        history=[{"role": "user", "content": "Previous message"}],
    )
    assert decision.mode == "assessment"
    assert decision.allowed_tools == ["log_concern", "lookup_medication"]
    assert decision == ModeDecision(
        mode="assessment",
        allowed_tools=["log_concern", "lookup_medication"],
        active_skills=["base-personality", "assessment-skill"],
        max_tool_iterations=8,
        retrieval_budget=5,
        matched_rule=1,
    )


def test_the_seed_call_shape_with_one_mapping_works_too(router: KeywordModeRouter) -> None:
    decision = router.resolve({"message": "Can you assess my symptoms?", "history": []})
    assert decision.mode == "assessment"


def test_no_match_gives_the_default_mode_with_no_matched_rule(router: KeywordModeRouter) -> None:
    decision = router.resolve("Hi there, how are you?")
    assert (decision.mode, decision.matched_rule) == ("general", None)
    assert decision.allowed_tools == ["greet_user", "log_concern"]
    assert (decision.active_skills, decision.max_tool_iterations, decision.retrieval_budget) == (
        ["base-personality"],
        5,
        3,
    )


def test_safety_mode_has_no_tools_and_one_iteration(router: KeywordModeRouter) -> None:
    decision = router.resolve("I want to KILL MYSELF")
    assert (decision.mode, decision.allowed_tools, decision.max_tool_iterations) == ("safety", [], 1)


@pytest.mark.parametrize("message", ["Please DIAGNOSE this", "Diagnose me", "an Assessment, please", "evaluate."])
def test_keywords_match_case_insensitively(router: KeywordModeRouter, message: str) -> None:
    assert router.resolve(message).mode == "assessment"


@pytest.mark.parametrize(
    "message", ["I had a reassessment last year", "undiagnosed-ish", "revaluate", "selfharming is a made-up word"]
)
def test_keywords_match_on_word_boundaries_only(router: KeywordModeRouter, message: str) -> None:
    assert router.resolve(message).mode == "general"


def test_phrases_match_their_words_in_a_row_and_hyphens_are_word_boundaries(router: KeywordModeRouter) -> None:
    assert router.resolve("thoughts of self harm").mode == "safety"
    assert router.resolve("myself, I would never kill").mode == "general"


def test_an_exclude_pattern_that_matches_skips_the_rule(router: KeywordModeRouter) -> None:
    assert router.resolve("What is an assessment?").mode == "general"
    assert router.resolve("WHAT IS a diagnosis? Please diagnose me").mode == "general"
    assert router.resolve("Please diagnose me").mode == "assessment"


def test_an_excluded_rule_lets_a_later_rule_match() -> None:
    router = KeywordModeRouter(
        default_mode={"mode": "general", "allowed_tools": []},
        rules=[
            {
                "keywords": ["refund"],
                "mode": "billing",
                "definition": {"allowed_tools": ["refund"]},
                "exclude": ["policy"],
            },
            {"keywords": ["refund"], "mode": "docs", "definition": {"allowed_tools": ["search_docs"]}},
        ],
    )
    assert router.resolve("what is your refund policy").mode == "docs"
    assert router.resolve("refund my order").mode == "billing"


def test_rules_go_by_priority_then_declaration_order() -> None:
    router = KeywordModeRouter(
        default_mode=ModeDefinition(mode="general", allowed_tools=[]),
        rules=[
            {"keywords": ["pain"], "mode": "first", "definition": {"allowed_tools": []}},
            {"keywords": ["pain"], "mode": "second", "definition": {"allowed_tools": []}},
            {"keywords": ["pain"], "mode": "urgent", "definition": {"allowed_tools": []}, "priority": 10},
            {"keywords": ["pain"], "mode": "late-urgent", "definition": {"allowed_tools": []}, "priority": 10},
        ],
    )
    decision = router.resolve("chest pain")
    assert (decision.mode, decision.matched_rule) == ("urgent", 2)
    unprioritised = KeywordModeRouter(
        default_mode=ModeDefinition(mode="general", allowed_tools=[]),
        rules=[
            {"keywords": ["pain"], "mode": "first", "definition": {"allowed_tools": []}},
            {"keywords": ["pain"], "mode": "second", "definition": {"allowed_tools": []}},
        ],
    )
    assert unprioritised.resolve("pain").mode == "first"


def test_recent_user_history_counts_for_keywords_but_not_for_excludes(router: KeywordModeRouter) -> None:
    history = [HumanMessage("Can you diagnose a rash?"), AIMessage("Sure, tell me more.")]
    assert router.resolve("It itches.", history=history).mode == "assessment"
    # An assistant message never switches the mode.
    assert router.resolve("ok", history=[{"role": "assistant", "content": "I cannot diagnose"}]).mode == "general"
    # Only the latest `history_scan_depth` user messages are read.
    old = [{"role": "user", "content": "diagnose"}, *[{"role": "user", "content": "x"}] * 3]
    assert router.resolve("ok", history=old).mode == "general"


def test_a_rule_with_an_invalid_regex_fails_at_construction_naming_it() -> None:
    with pytest.raises(UserError, match=r"rules\[0\].*'\(what is'.*not a valid regex"):
        KeywordModeRouter(
            default_mode=ModeDefinition(mode="general", allowed_tools=[]),
            rules=[{"keywords": ["x"], "mode": "m", "definition": {"allowed_tools": []}, "exclude": ["(what is"]}],
        )


def test_compiled_patterns_keep_their_own_flags() -> None:
    router = KeywordModeRouter(
        default_mode=ModeDefinition(mode="general", allowed_tools=[]),
        rules=[
            {"keywords": ["help"], "mode": "m", "definition": {"allowed_tools": []}, "exclude": [re.compile("ONLY")]}
        ],
    )
    assert router.resolve("help ONLY").mode == "general"
    assert router.resolve("help only").mode == "m"


@pytest.mark.parametrize(
    ("rule", "match"),
    [
        ({"mode": "m", "definition": {"allowed_tools": []}}, "keywords"),
        ({"keywords": ["x"], "mode": "m"}, "definition"),
        ({"keywords": ["!!"], "mode": "m", "definition": {"allowed_tools": []}}, "keywords made of words"),
        ({"keywords": ["x"], "mode": "m", "definition": {}}, "allowed_tools"),
        ({"keywords": ["x"], "mode": "m", "definition": {"allowed_tools": []}, "prio": 1}, "unknown keys"),
        ({"keywords": "x", "mode": "m", "definition": {"allowed_tools": []}}, "list of names"),
    ],
)
def test_malformed_rules_fail_at_construction(rule: dict[str, object], match: str) -> None:
    with pytest.raises(UserError, match=match):
        KeywordModeRouter(default_mode=ModeDefinition(mode="general", allowed_tools=[]), rules=[rule])


def test_mode_definition_checks_its_fields() -> None:
    with pytest.raises(UserError, match="max_tool_iterations"):
        ModeDefinition(mode="m", allowed_tools=[], max_tool_iterations=-1)
    with pytest.raises(UserError, match="allowed_tools"):
        ModeDefinition(mode="m", allowed_tools="lookup")  # type: ignore[arg-type]
    assert ModeDefinition(mode="m", allowed_tools=("a", "b")).allowed_tools == ["a", "b"]


def test_modes_lists_every_mode_the_router_can_pick(router: KeywordModeRouter) -> None:
    assert [m.mode for m in router.modes] == ["general", "safety", "assessment"]


def test_definitions_may_use_the_seeds_camel_case_keys() -> None:
    router = KeywordModeRouter(
        default_mode={"mode": "general", "allowedTools": ["greet_user"], "maxToolIterations": 5, "retrievalBudget": 3},
        rules=[
            {
                "keywords": ["suicide"],
                "mode": "safety",
                "definition": {"allowedTools": [], "activeSkills": ["crisis-response"], "maxToolIterations": 1},
            }
        ],
    )
    decision = router.resolve("suicide")
    assert (decision.mode, decision.allowed_tools, decision.active_skills, decision.max_tool_iterations) == (
        "safety",
        [],
        ["crisis-response"],
        1,
    )
    assert router.resolve("hi").retrieval_budget == 3


def test_changing_a_returned_decision_does_not_change_the_router(router: KeywordModeRouter) -> None:
    router.resolve("Please diagnose me").allowed_tools.append("delete_everything")
    assert router.resolve("Please diagnose me").allowed_tools == ["log_concern", "lookup_medication"]
