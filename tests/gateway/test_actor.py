from __future__ import annotations

import pytest

from ai_utils.exceptions import UserError
from ai_utils.gateway import Actor, to_actor


def test_mappings_in_snake_or_camel_case_become_actors() -> None:
    assert to_actor({"userId": "u", "tenantId": "t", "roles": ["a"], "plan": "pro"}) == Actor(
        user_id="u", tenant_id="t", roles=("a",), plan="pro"
    )
    assert to_actor({"user_id": "u", "attributes": {"org": 1}}) == Actor(user_id="u", attributes={"org": 1})
    assert to_actor(None) is None
    actor = Actor(user_id="x")
    assert to_actor(actor) is actor


def test_bad_actors_are_user_errors() -> None:
    with pytest.raises(UserError, match="'email'"):
        to_actor({"email": "a@b"})
    with pytest.raises(UserError, match="roles"):
        to_actor({"roles": "admin"})
    with pytest.raises(UserError, match="mapping"):
        to_actor("u1")  # type: ignore[arg-type]


def test_merge_keeps_own_values_and_fills_the_rest() -> None:
    own = Actor(user_id="u", attributes={"a": 1})
    default = Actor(user_id="sys", tenant_id="t", roles=("r",), plan="pro", attributes={"a": 0, "b": 2})
    assert own.merged_with(default) == Actor(
        user_id="u", tenant_id="t", roles=("r",), plan="pro", attributes={"a": 1, "b": 2}
    )
    assert own.merged_with(None) is own


def test_audit_form_drops_secret_looking_attributes() -> None:
    actor = Actor(user_id="u", attributes={"region": "eu", "apiKey": "k", "password": "p", "auth_header": "h"})
    assert actor.to_audit()["attributes"] == {"region": "eu"}
