from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel

from ai_utils.gateway import hash_canonical, truncate_for_audit


class Ticket(BaseModel):
    id: int


@dataclass
class Point:
    x: int


def test_hash_ignores_key_order_and_distinguishes_values() -> None:
    assert hash_canonical({"a": 1, "b": [1, 2]}) == hash_canonical({"b": [1, 2], "a": 1})
    assert hash_canonical({"a": 1}) != hash_canonical({"a": 2})
    assert len(hash_canonical("x")) == 64


def test_hash_accepts_models_dataclasses_sets_dates_bytes_and_objects() -> None:
    value = {
        "m": Ticket(id=1),
        "d": Point(1),
        "s": {"b", "a"},
        "t": datetime(2030, 1, 1, tzinfo=UTC),
        "raw": b"\x01",
        "o": object,
    }
    assert hash_canonical(value) == hash_canonical(dict(reversed(list(value.items()))))
    assert hash_canonical({"s": {"a", "b"}}) == hash_canonical({"s": ["a", "b"]})


def test_truncate_never_exceeds_max_length() -> None:
    assert truncate_for_audit("short") == "short"
    long = "x" * 5000
    assert len(truncate_for_audit(long)) == 1500
    assert truncate_for_audit(long).endswith("…")
    for limit in (0, 1, 2, 10):
        assert len(truncate_for_audit(long, max_length=limit)) <= limit
    assert truncate_for_audit(long, max_length=-3) == ""


def test_truncate_renders_non_strings_as_json() -> None:
    assert truncate_for_audit({"b": 1, "a": [1]}) == '{"a":[1],"b":1}'


def test_hash_is_sha256_of_sorted_compact_json() -> None:
    value = {"b": [1, 2.5, "Grüße", None], "a": {"y": True, "x": "ok"}, "n": -7}
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert hash_canonical(value) == hashlib.sha256(text.encode()).hexdigest()


def test_hash_takes_integers_beyond_64_bits() -> None:
    big = {"n": 2**70, "m": "x"}
    assert hash_canonical(big) == hashlib.sha256(b'{"m":"x","n":1180591620717411303424}').hexdigest()
    assert hash_canonical(big) != hash_canonical({"n": 2**70 + 1, "m": "x"})


def test_a_part_serialized_once_hashes_like_the_value_itself_on_both_encoder_paths() -> None:
    from ai_utils._json import RawJSON
    from ai_utils.gateway.hashing import _canonical_json

    views = [{"role": "human", "content": "héllo"}, {"role": "ai", "tool_calls": [{"args": {"b": 2, "a": 1}}]}]
    embedded = {"feature": "f", "messages": RawJSON(_canonical_json(views)), "tools": ["add"]}
    assert hash_canonical(embedded) == hash_canonical({"feature": "f", "messages": views, "tools": ["add"]})
    # An integer past 64 bits sends the whole value down the stdlib path, which must embed the part the same way.
    assert hash_canonical({**embedded, "n": 2**70}) == hash_canonical(
        {"feature": "f", "messages": views, "tools": ["add"], "n": 2**70}
    )
