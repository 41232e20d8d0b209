"""define_loop checks a definition once, up front, and a loop round-trips through JSON."""

from __future__ import annotations

import json
import pickle

import pytest
from loops._loop_support import Ledger, Triage, support_loop, support_model, support_tools

from ai_utils import (
    Loop,
    LoopDefinitionError,
    LoopRunner,
    UserError,
    agent_step,
    ctx,
    define_loop,
    otherwise,
    permission,
    static_model,
    tool_step,
    when,
)

ALLOW_ALL = [permission("all", resource="tool", action="call", effect="allow", match={"tool": "*"})]


def one_step(**steps_next: object) -> dict[str, object]:
    return {"a": agent_step(prompt="p", next=steps_next.get("next", "end"))}  # type: ignore[arg-type]


def test_ctx_is_the_plain_context_binding_object() -> None:
    assert ctx("request.order_id") == {"$context": "request.order_id"}
    with pytest.raises(LoopDefinitionError, match="not a context path"):
        ctx("request..order_id")


@pytest.mark.parametrize(
    ("steps", "start", "fragment", "step_key"),
    [
        ({"a": agent_step(next="nowhere")}, "a", "names 'nowhere', which is no step", "a"),
        ({"a": agent_step(next="end")}, "b", "start='b' is no step", "b"),
        ({"a": agent_step(next=[when("x ==", "end"), otherwise("end")])}, "a", "is not valid CEL", "a"),
        ({"a": agent_step(next=[when("true", "ghost")])}, "a", "names 'ghost'", "a"),
        ({"a": agent_step(next="b"), "b": agent_step(next="a")}, "a", "can never reach 'end'", "a"),
        ({"end": agent_step(next="end")}, "end", "not allowed", "end"),
        ({"a": tool_step("t", input={"when": object()}, next="end")}, "a", "must be JSON data", "a"),
        ({"request": agent_step(next="end")}, "request", "protected context root", "request"),
        (
            {"a": tool_step("t", input={}, save_as="request.x", next="end")},
            "a",
            "would overwrite the protected context root 'request'",
            "a",
        ),
    ],
)
def test_bad_definitions_fail_at_define_loop_naming_the_step(
    steps: dict[str, object], start: str, fragment: str, step_key: str
) -> None:
    with pytest.raises(LoopDefinitionError, match=fragment) as caught:
        define_loop("bad", start=start, steps=steps, permissions=ALLOW_ALL)  # type: ignore[arg-type]
    assert caught.value.step_key == step_key
    assert repr(step_key) in str(caught.value)
    assert isinstance(caught.value, UserError)


def test_a_cycle_with_an_exit_is_fine_but_one_without_is_not() -> None:
    steps = {
        "draft": agent_step(next="review"),
        "review": agent_step(next=[when("review.text == 'ok'", "end"), otherwise("draft")]),
    }
    define_loop("ok", start="draft", steps=steps, permissions=ALLOW_ALL)
    trapped = {**steps, "spin": agent_step(next="spin")}
    with pytest.raises(LoopDefinitionError, match="'spin' can never reach 'end'"):
        define_loop("bad", start="draft", steps=trapped, permissions=ALLOW_ALL)


def test_protected_roots_given_by_the_caller_cannot_be_step_outputs() -> None:
    with pytest.raises(LoopDefinitionError, match="protected context root 'customer'"):
        define_loop(
            "p",
            start="customer",
            steps={"customer": agent_step(next="end")},
            permissions=ALLOW_ALL,
            protected_roots=["customer"],
        )


def test_open_url_actions_must_be_https() -> None:
    def result(url: object) -> dict[str, object]:
        return {"presentation": {"actions": [{"id": "p", "type": "open_url", "label": "Open", "url": url}]}}

    for bad in ("http://example.com/x", "javascript:alert(1)", "file:///etc/passwd", 42):
        with pytest.raises(LoopDefinitionError, match="only https:// URLs"):
            define_loop("u", start="a", steps=one_step(), permissions=ALLOW_ALL, result=result(bad))  # type: ignore[arg-type]
    define_loop("u", start="a", steps=one_step(), permissions=ALLOW_ALL, result=result("https://example.com"))  # type: ignore[arg-type]
    define_loop("u", start="a", steps=one_step(), permissions=ALLOW_ALL, result=result(ctx("a.url")))  # type: ignore[arg-type]


def test_malformed_parts_are_refused_by_their_builders() -> None:
    with pytest.raises(LoopDefinitionError, match="otherwise"):
        agent_step(next=[otherwise("end"), when("true", "end")])
    with pytest.raises(LoopDefinitionError, match="effect="):
        permission("x", resource="tool", action="call", effect="maybe", match={"tool": "t"})  # type: ignore[arg-type]
    with pytest.raises(LoopDefinitionError, match="resource="):
        permission("x", resource="file", action="call", effect="allow", match={})  # type: ignore[arg-type]
    with pytest.raises(LoopDefinitionError, match="match="):
        permission("x", resource="tool", action="call", effect="allow", match={"args": "t"})  # type: ignore[dict-item]
    with pytest.raises(LoopDefinitionError, match="unique"):
        define_loop("d", start="a", steps=one_step(), permissions=ALLOW_ALL * 2)  # type: ignore[arg-type]


def test_runner_refuses_a_loop_whose_steps_name_tools_it_was_not_given() -> None:
    read, search_docs, _ = support_tools(Ledger())
    with pytest.raises(LoopDefinitionError, match="'issue_refund'") as caught:
        LoopRunner(support_loop(), llm=static_model("x"), tools=[read, search_docs])
    assert caught.value.step_key == "refund"
    with pytest.raises(LoopDefinitionError, match="needs `llm=`") as caught:
        LoopRunner(support_loop(), tools=support_tools(Ledger()))
    assert caught.value.step_key == "triage"


def test_a_loop_round_trips_through_json() -> None:
    loop = support_loop()
    data = loop.to_json()
    text = json.dumps(data)
    again = Loop.from_json(json.loads(text))
    assert again.to_json() == data and again == loop
    assert again != Loop.from_json({**data, "name": "other"})
    assert Loop.from_json(text).to_json() == data
    assert list(again.steps) == ["triage", "answer", "refund"]
    assert data["steps"]["refund"]["input"] == {"order_id": {"$context": "request.order_id"}, "reason": "customer"}
    assert data["steps"]["triage"]["next"] == [
        {"when": "triage.needs_refund == true", "target": "refund"},
        {"otherwise": "answer"},
    ]
    assert data["steps"]["answer"]["tool_choice"] == {"type": "tool", "name": "search_docs"}
    assert data["steps"]["triage"]["output"] == Triage.model_json_schema()
    assert [p["id"] for p in data["permissions"]] == ["support-tools", "refund-approval"]
    assert data["result"] == {"data": {"$context": "refund"}, "presentation": {"text": {"$context": "answer.text"}}}


def test_from_json_checks_the_definition_again() -> None:
    data = support_loop().to_json()
    data["steps"]["triage"]["next"] = [{"when": "triage.needs_refund ==", "target": "refund"}]
    with pytest.raises(LoopDefinitionError, match="not valid CEL") as caught:
        Loop.from_json(data)
    assert caught.value.step_key == "triage"


def test_loop_errors_survive_pickling() -> None:
    error = LoopDefinitionError("bad", step_key="a")
    again = pickle.loads(pickle.dumps(error))
    assert (str(again), again.step_key) == ("bad", "a")


def test_a_loop_read_back_from_json_runs_the_same_flow() -> None:
    ledger = Ledger()
    loop = Loop.from_json(json.dumps(support_loop().to_json()))
    runner = LoopRunner(loop, llm=support_model(ledger), tools=support_tools(ledger))
    paused = runner.invoke({"request": {"order_id": "J-1", "text": "refund"}}, thread_id="j")
    assert paused["question"] == "Refunds require human approval."  # type: ignore[index]
    out = runner.invoke(thread_id="j", decision="approve")
    assert out.context["triage"] == {"needs_refund": True, "category": "billing"}  # type: ignore[union-attr]
    assert out.data["refund_id"] == "R-J-1"  # type: ignore[union-attr]


def test_the_runner_exposes_the_compiled_state_graph() -> None:
    runner = LoopRunner(support_loop(), llm=static_model("x"), tools=support_tools(Ledger()))
    drawing = runner.graph.get_graph().draw_mermaid(with_styles=False)
    for edge in ("__start__ --> triage", "triage -.-> refund", "triage -.-> answer", "refund -.-> __end__"):
        assert edge in drawing
