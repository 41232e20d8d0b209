"""FakeJevServer: speaks the real protocol over HTTP, validates like the API, answers from rules, records."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ai_utils.testing.jev_server import FakeJevServer

NOUL = {"type": "noul", "instructions": "Refund?"}
CHOICE = {"type": "choice", "instructions": "Team?", "criteria": {"sales": None, "billing": None, "technical": None}}
SCORE = {"type": "score", "instructions": "Mood?", "criteria": ["Calm", "Frustrated", "Very angry"]}


def post(
    jev: FakeJevServer, body: Any, *, path: str = "/api/alpha/decisions", key: str | None = None
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key or jev.api_key}"}
    return httpx.post(f"http://127.0.0.1:{jev.port}{path}", json=body, headers=headers)


def body(**questions: Any) -> dict[str, Any]:
    return {"model": "~typesafe/jev-latest", "state": "text", "questions": questions}


def test_default_answers_pick_the_first_label_and_level_and_a_low_noul(jev: FakeJevServer) -> None:
    reply = post(jev, body(c=CHOICE, n=NOUL, s=SCORE)).json()

    assert reply["answers"]["c"] == {
        "type": "choice",
        "choice": "sales",
        "probabilities": {"sales": 0.9, "billing": 0.05, "technical": 0.05},
        "confidence": 0.85,
    }
    assert reply["answers"]["n"] == {"type": "noul", "noul": 0.1}
    assert reply["answers"]["s"]["score"] == 0.1
    assert reply["answers"]["s"]["probabilities"] == {"0": 0.9, "1": 0.1, "2": 0.0}
    assert reply["answers"]["s"]["legend"] == {"0": "Calm", "1": "Frustrated", "2": "Very angry"}
    assert set(reply) == {"model", "answers", "usage", "id", "provider"}


def test_answers_derive_confidence_with_the_hosted_api_formulas(jev: FakeJevServer) -> None:
    # The recorded OpenRouter reply (reference §3): same probabilities -> same score and confidences.
    jev.answer("department", probabilities={"sales": 0, "billing": 0.88, "technical": 0.12})
    jev.answer("frustration", probabilities={0: 0, 1: 0.96, 2: 0.04})

    answers = post(jev, body(department=CHOICE, frustration=SCORE)).json()["answers"]

    assert answers["department"]["choice"] == "billing"
    assert answers["department"]["confidence"] == 0.82
    assert answers["frustration"]["score"] == 1.04
    assert answers["frustration"]["confidence"] == 0.94


def test_a_callable_decides_answers_from_the_question_and_state(jev: FakeJevServer) -> None:
    seen: list[tuple[str, str, Any]] = []

    def decide(name: str, question: dict[str, Any], state: Any) -> dict[str, Any] | None:
        seen.append((name, question["type"], state))
        return {"noul": 0.8} if question["type"] == "noul" else None

    jev.answer_with(decide)
    answers = post(jev, body(n=NOUL, c=CHOICE)).json()["answers"]

    assert answers["n"]["noul"] == 0.8
    assert answers["c"]["choice"] == "sales"
    assert seen == [("n", "noul", "text"), ("c", "choice", "text")]


def test_a_single_label_choice_is_certain(jev: FakeJevServer) -> None:
    one = {"type": "choice", "instructions": "Only?", "criteria": {"only": None}}

    answer = post(jev, body(o=one)).json()["answers"]["o"]

    assert answer == {"type": "choice", "choice": "only", "probabilities": {"only": 1.0}, "confidence": 1.0}


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"choice": "legal"}, "'legal' is not one of"),
        ({"noul": 0.5}, "the rule sets ['noul']"),
        ({"probabilities": {"legal": 1.0}}, "unknown labels ['legal']"),
    ],
)
def test_a_rule_that_does_not_fit_the_question_is_a_500_explaining_it(
    jev: FakeJevServer, rule: dict[str, Any], message: str
) -> None:
    jev.answer("c", **rule)

    reply = post(jev, body(c=CHOICE))

    assert reply.status_code == 500
    assert message in reply.json()["error"]["message"]


@pytest.mark.parametrize(
    ("rule", "message"),
    [({"noul": 2.0}, "not between 0 and 1"), ({"score": 3.5}, "not between 0 and 2")],
)
def test_out_of_range_rules_are_reported(jev: FakeJevServer, rule: dict[str, Any], message: str) -> None:
    jev.answer("q", **rule)

    reply = post(jev, body(q=NOUL if "noul" in rule else SCORE))

    assert reply.status_code == 500 and message in reply.json()["error"]["message"]


def test_score_probability_rules_must_name_existing_levels(jev: FakeJevServer) -> None:
    jev.answer("s", probabilities={7: 1.0})

    assert post(jev, body(s=SCORE)).status_code == 500


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"state": "x", "questions": {"n": NOUL}}, "`model` is required"),
        ({"model": "openai/gpt-5", "state": "x", "questions": {"n": NOUL}}, "not a decisions model"),
        ({"model": "~typesafe/jev-latest", "questions": {"n": NOUL}}, "`state` must be"),
        ({"model": "~typesafe/jev-latest", "state": "x", "questions": {}}, "at least one question"),
        ({"model": "~typesafe/jev-latest", "state": "x", "questions": {"n": NOUL}, "temperature": 0}, "'temperature'"),
        (body(n={"type": "noul"}), "`instructions` is required"),
        (body(n={"type": "noul", "instructions": "x", "criteria": {"true": "y"}}), "both `true` and `false`"),
        (body(n={"type": "noul", "instructions": "x", "criteria": {"maybe": "y"}}), "object with `true` and `false`"),
        (body(n={"type": "box", "instructions": "x"}), "need an image"),
        (body(n={"type": "vote", "instructions": "x"}), "unknown type"),
        (body(n={"type": "noul", "instructions": "x", "options": []}), "unrecognized keys"),
        (body(n="Refund?"), "must be an object"),
        (body(c={"type": "choice", "instructions": "x", "criteria": ["a", "b"]}), "1 to 255 labels"),
        (body(s={"type": "score", "instructions": "x", "criteria": ["only"]}), "2 to 10 levels"),
    ],
)
def test_invalid_bodies_get_openrouters_400_error_shape(jev: FakeJevServer, payload: Any, message: str) -> None:
    reply = post(jev, payload)

    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == 400
    assert message in reply.json()["error"]["message"]


def test_the_typesafe_path_uses_its_own_error_shapes_and_reply(jev: FakeJevServer) -> None:
    unauthorized = post(jev, body(n=NOUL), path="/v1/systemone", key="wrong")
    unknown_model = post(jev, {**body(n=NOUL), "model": "gpt"}, path="/v1/systemone")
    invalid = post(jev, {**body(n={"type": "noul"}), "model": "jev-latest"}, path="/v1/systemone")
    ok = post(jev, {**body(n=NOUL), "model": "jev-latest"}, path="/v1/systemone")

    assert unauthorized.status_code == 401
    assert unauthorized.json() == {"detail": {"error_type": "authentication_error", "message": "Invalid API key"}}
    assert unknown_model.status_code == 422 and "Unknown model: gpt" in unknown_model.json()["detail"][0]["msg"]
    assert invalid.status_code == 422
    assert set(ok.json()) == {"model", "answers", "usage"}
    assert ok.headers["x-typesafe-request-id"].startswith("req_fake")


def test_the_openrouter_systemone_alias_accepts_bare_ids(jev: FakeJevServer) -> None:
    assert post(jev, {**body(n=NOUL), "model": "jev-1.13"}, path="/api/v1/systemone").status_code == 200
    assert post(jev, {**body(n=NOUL), "model": "gpt"}, path="/api/v1/systemone").status_code == 400


def test_wrong_key_wrong_path_and_wrong_content_type_are_refused(jev: FakeJevServer) -> None:
    assert post(jev, body(n=NOUL), key="nope").json() == {
        "error": {"code": 401, "message": "No auth credentials found"}
    }
    assert post(jev, body(n=NOUL), path="/api/v1/chat/completions").status_code == 404
    auth = {"Authorization": f"Bearer {jev.api_key}"}
    text = httpx.post(jev.url + "/alpha/decisions", content=b"{}", headers={**auth, "Content-Type": "text/plain"})
    broken = httpx.post(
        jev.url + "/alpha/decisions", content=b"{", headers={**auth, "Content-Type": "application/json"}
    )
    assert text.status_code == 400
    assert broken.status_code == 400 and "not a JSON object" in broken.json()["error"]["message"]
    assert httpx.get(jev.url + "/v1/models").status_code == 404


def test_requests_are_recorded_with_headers_and_parsed_bodies(jev: FakeJevServer) -> None:
    post(jev, body(n=NOUL))
    post(jev, body(n=NOUL), key="bad")

    first, second = jev.requests
    assert (first.method, first.path) == ("POST", "/api/alpha/decisions")
    assert first.body == body(n=NOUL)
    assert first.headers["authorization"] == f"Bearer {jev.api_key}"
    assert first.raw.startswith(b"{")
    assert second.headers["authorization"] == "Bearer bad"


def test_scripted_failures_and_raw_replies_run_in_order_then_stop(jev: FakeJevServer) -> None:
    jev.fail(429, times=2, retry_after=3, headers={"X-Extra": "1"})
    jev.reply_raw("oops", status=200, content_type="text/plain")
    jev.fail(503, body="down")

    replies = [post(jev, body(n=NOUL)) for _ in range(5)]

    assert [r.status_code for r in replies] == [429, 429, 200, 503, 200]
    assert replies[0].headers["retry-after"] == "3" and replies[0].headers["x-extra"] == "1"
    assert replies[0].json() == {"error": {"code": 429, "message": "Fake failure 429"}}
    assert replies[2].text == "oops" and replies[2].headers["content-type"] == "text/plain"
    assert replies[3].text == "down"


def test_delays_apply_to_the_next_requests_and_reset_forgets_everything(jev: FakeJevServer) -> None:
    jev.delay(0.2, times=1)
    jev.answer("n", noul=0.7)

    slow = post(jev, body(n=NOUL))
    fast = post(jev, body(n=NOUL))
    jev.reset()
    after = post(jev, body(n=NOUL))

    assert slow.elapsed.total_seconds() >= 0.2
    assert fast.elapsed.total_seconds() < 0.2
    assert fast.json()["answers"]["n"]["noul"] == 0.7
    assert after.json()["answers"]["n"]["noul"] == 0.1
    assert len(jev.requests) == 1


def test_start_and_stop_are_idempotent_and_port_needs_a_running_server() -> None:
    server = FakeJevServer(api_key="k2", model_version="typesafe/jev-9")
    with pytest.raises(RuntimeError, match="not running"):
        server.url  # noqa: B018
    server.start()
    server.start()
    try:
        reply = httpx.post(
            server.url + "/alpha/decisions", json=body(n=NOUL), headers={"Authorization": "Bearer k2"}
        ).json()
        assert reply["model"] == "typesafe/jev-9"
        assert server.typesafe_url == server.url.removesuffix("/api")
    finally:
        server.stop()
        server.stop()
