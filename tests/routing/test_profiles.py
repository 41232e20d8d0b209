"""ModelProfiles: recursive, deterministic, deduplicated, cached resolution that fails closed."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from ai_utils import ModelProfileError, ModelProfiles, UserError, get_llm


def spec_profiles() -> ModelProfiles:
    return ModelProfiles(
        {
            "fast": "openai/gpt-4o-mini",
            "balanced": {"primary": "anthropic/claude-sonnet-4", "fallbacks": [{"profile": "fast"}, "openai/gpt-5"]},
        }
    )


def test_resolve_gives_primary_then_fallbacks_in_order() -> None:
    profiles = spec_profiles()
    assert profiles.resolve({"profile": "balanced"}) == [
        "anthropic/claude-sonnet-4",
        "openai/gpt-4o-mini",
        "openai/gpt-5",
    ]
    assert profiles.resolve({"profile": "fast"}) == ["openai/gpt-4o-mini"]


def test_a_plain_string_is_always_a_concrete_model_id() -> None:
    # Even when a profile of that name exists: only {"profile": ...} selects a profile.
    assert spec_profiles().resolve("fast") == ["fast"]
    assert spec_profiles().resolve("openai/gpt-5") == ["openai/gpt-5"]


def test_duplicates_are_dropped_keeping_the_first_place() -> None:
    profiles = ModelProfiles(
        {
            "a": {"primary": "m1", "fallbacks": ["m2", "m1"]},
            "b": {"primary": {"profile": "a"}, "fallbacks": ["m3", {"profile": "a"}, "m2"]},
            "alias": {"profile": "b"},
        }
    )
    assert profiles.resolve({"profile": "b"}) == ["m1", "m2", "m3"]
    assert profiles.resolve({"profile": "alias"}) == ["m1", "m2", "m3"]


def test_resolution_is_deterministic_and_cached_copies_cannot_poison_it() -> None:
    profiles = spec_profiles()
    first = profiles.resolve({"profile": "balanced"})
    first.append("evil/model")
    assert profiles.resolve({"profile": "balanced"}) == first[:-1]
    assert [spec_profiles().resolve({"profile": "balanced"}) for _ in range(3)] == [first[:-1]] * 3


def test_an_unknown_profile_fails_closed_naming_it() -> None:
    with pytest.raises(ModelProfileError, match="'missing'") as err:
        spec_profiles().resolve({"profile": "missing"})
    assert err.value.profile == "missing"
    nested = ModelProfiles({"a": {"primary": "m", "fallbacks": [{"profile": "gone"}]}})
    with pytest.raises(ModelProfileError, match=r"'gone' \(referenced by 'a'\)") as err:
        nested.resolve({"profile": "a"})
    assert err.value.profile == "gone"
    assert isinstance(err.value, UserError)


def test_a_cycle_fails_closed_naming_the_loop() -> None:
    profiles = ModelProfiles(
        {"a": {"primary": "m", "fallbacks": [{"profile": "b"}]}, "b": {"profile": "c"}, "c": {"profile": "a"}}
    )
    with pytest.raises(ModelProfileError, match="a -> b -> c -> a") as err:
        profiles.resolve({"profile": "a"})
    assert err.value.profile == "a"
    with pytest.raises(ModelProfileError, match="cycle"):
        ModelProfiles({"self": {"profile": "self"}}).resolve({"profile": "self"})


def _chain(depth: int) -> dict[str, Any]:
    """p1 -> p2 -> ... -> p<depth> -> a concrete model: ``depth`` nested profiles."""
    defs: dict[str, Any] = {f"p{i}": {"profile": f"p{i + 1}"} for i in range(1, depth)}
    defs[f"p{depth}"] = "model/x"
    return defs


def test_eight_nested_profiles_resolve_and_nine_fail_closed() -> None:
    assert ModelProfiles(_chain(8)).resolve({"profile": "p1"}) == ["model/x"]
    with pytest.raises(ModelProfileError, match="nests too deep.*at most 8") as err:
        ModelProfiles(_chain(9)).resolve({"profile": "p1"})
    assert err.value.profile == "p9"


def test_depth_is_checked_from_the_selected_root_even_after_a_shallow_lookup_was_cached() -> None:
    profiles = ModelProfiles(_chain(9))
    assert profiles.resolve({"profile": "p2"}) == ["model/x"]  # 8 deep from p2: fine, and cached
    with pytest.raises(ModelProfileError, match="nests too deep"):
        profiles.resolve({"profile": "p1"})


def test_sixteen_models_resolve_and_seventeen_fail_closed() -> None:
    sixteen = ModelProfiles({"wide": {"primary": "m0", "fallbacks": [f"m{i}" for i in range(1, 16)]}})
    assert len(sixteen.resolve({"profile": "wide"})) == 16
    nested = ModelProfiles(
        {
            "a": {"primary": "m0", "fallbacks": [f"m{i}" for i in range(1, 9)]},
            "b": {"primary": {"profile": "a"}, "fallbacks": [f"n{i}" for i in range(8)]},
        }
    )
    with pytest.raises(ModelProfileError, match="'b' resolves to 17 models; at most 16") as err:
        nested.resolve({"profile": "b"})
    assert err.value.profile == "b"


def test_the_allowlist_grants_root_profiles_and_nested_ones_come_along() -> None:
    profiles = ModelProfiles(spec_profiles()._definitions, allowed=["balanced"])
    assert profiles.resolve({"profile": "balanced"})[1] == "openai/gpt-4o-mini"  # nested `fast` inherits the grant
    with pytest.raises(ModelProfileError, match="'fast' is not in the allowlist") as err:
        profiles.resolve({"profile": "fast"})  # selecting the nested one directly needs its own grant
    assert err.value.profile == "fast"
    # A call can narrow the grant, never widen it.
    with pytest.raises(ModelProfileError, match="not in the allowlist"):
        spec_profiles().resolve({"profile": "balanced"}, allowed=["fast"])
    with pytest.raises(ModelProfileError, match="not in the allowlist"):
        profiles.resolve({"profile": "fast"}, allowed=["fast", "balanced"])


def test_an_allowlist_naming_an_unknown_profile_fails_closed() -> None:
    with pytest.raises(ModelProfileError, match="unknown profile 'turbo'") as err:
        ModelProfiles({"fast": "m"}, allowed=["turbo"])
    assert err.value.profile == "turbo"


@pytest.mark.parametrize(
    "definition",
    [
        {"primary": "m", "fallback": ["x"]},
        {"fallbacks": ["x"]},
        42,
        "",
        {"primary": "m", "fallbacks": "x"},
        {"primary": 7},
    ],
)
def test_malformed_definitions_fail_closed(definition: Any) -> None:
    with pytest.raises(ModelProfileError) as err:
        ModelProfiles({"bad": definition}).resolve({"profile": "bad"})
    assert err.value.profile == "bad"


def test_bad_selections_are_user_errors() -> None:
    with pytest.raises(UserError, match="Select a profile"):
        spec_profiles().resolve({"name": "fast"})
    with pytest.raises(UserError, match="mapping"):
        ModelProfiles(["fast"])  # type: ignore[arg-type]


def test_the_error_survives_pickling_for_worker_processes() -> None:
    try:
        spec_profiles().resolve({"profile": "nope"})
    except ModelProfileError as err:
        again = pickle.loads(pickle.dumps(err))
        assert (type(again), again.profile, str(again)) == (ModelProfileError, "nope", str(err))


def test_get_llm_fails_closed_before_building_any_model() -> None:
    with pytest.raises(ModelProfileError, match="'nope'"):
        get_llm("fake", profile="nope", profiles=spec_profiles(), responses=["x"])
    with pytest.raises(UserError, match="needs the profiles"):
        get_llm("fake", profile="fast", responses=["x"])
    with pytest.raises(UserError, match="not both"):
        get_llm("fake", "m", profile="fast", profiles=spec_profiles(), responses=["x"])


def test_a_one_model_profile_is_that_model_itself() -> None:
    llm = get_llm("fake", profile="fast", profiles={"fast": "tiny-model"}, responses=["hi"])
    assert llm.invoke("hello").response_metadata["model_name"] == "tiny-model"


def test_hints_come_from_definitions_or_the_hints_argument() -> None:
    profiles = ModelProfiles(
        {"fast": "m1", "balanced": {"primary": "m2", "hint": "Needs stronger reasoning."}},
        hints={"fast": "Short requests.", "balanced": "overridden"},
    )
    assert (profiles.hint("fast"), profiles.hint("balanced")) == ("Short requests.", "Needs stronger reasoning.")
    assert profiles.resolve({"profile": "balanced"}) == ["m2"]
