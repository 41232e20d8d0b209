"""A loop definition from outside (JSON) is checked whole, with the limits of one built in code.

Red-team style: each test first shows the attack, then that it is refused. The first class is the stored
JSON-schema output (answers validated exactly as a pydantic ``output`` would validate them); the second is a
definition that is too big, too deep or the wrong shape — always a `LoopDefinitionError`, never another
exception (pyo3's ``PanicException`` is a ``BaseException``), and never a crash.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field

from ai_utils import (
    Loop,
    LoopDefinitionError,
    LoopResult,
    LoopRunner,
    agent_step,
    ctx,
    define_loop,
    otherwise,
    permission,
    tool_step,
    when,
)
from ai_utils.testing import FunctionChatModel

ALLOW = [permission("all", resource="tool", action="call", effect="allow", match={"tool": "*"})]


class Refund(BaseModel):
    """How much to refund."""

    order_id: str
    amount: float = Field(le=100, description="EUR, at most 100")
    reason: str = Field(pattern="^(damaged|late)$")


class Bank:
    def __init__(self) -> None:
        self.refunds: list[float] = []

        @tool
        def issue_refund(order_id: str, amount: float) -> str:
            """Refund an order."""
            self.refunds.append(amount)
            return f"refunded {amount} for {order_id}"

        self.tool = issue_refund


def refund_loop(output: Any) -> Loop:
    return define_loop(
        "refunds",
        start="decide",
        steps={
            "decide": agent_step(prompt="Decide the refund.", output=output, next="pay"),
            "pay": tool_step(
                "issue_refund", input={"order_id": ctx("decide.order_id"), "amount": ctx("decide.amount")}, next="end"
            ),
        },
        permissions=ALLOW,
        result={"data": ctx("pay")},
    )


def scripted(answers: list[dict[str, Any]], seen: list[str]) -> FunctionChatModel:
    """Answers through the output tool in turn; records what the model was told after each answer."""

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if results:
            seen.append(results[-1].text)
        return {"tool_calls": [{"name": "Refund", "args": answers[min(len(results), len(answers) - 1)]}]}

    return FunctionChatModel(reply)


@pytest.mark.parametrize(
    ("attack", "complaint"),
    [
        ({"order_id": "O-1", "amount": 1_000_000, "reason": "late"}, "less than or equal to 100"),
        ({"order_id": "O-1", "amount": "lots", "reason": "late"}, "valid number"),
        ({"order_id": "O-1", "amount": 50, "reason": "because I said so"}, "should match pattern"),
        ({"order_id": "O-1", "reason": "late"}, "Field required"),
    ],
)
def test_a_json_loaded_output_schema_refuses_answers_exactly_as_the_pydantic_model(
    attack: dict[str, Any], complaint: str
) -> None:
    fine = {"order_id": "O-1", "amount": 50, "reason": "late"}
    outcomes = []
    for loop in (refund_loop(Refund), Loop.from_json(json.dumps(refund_loop(Refund).to_json()))):
        bank, seen = Bank(), []
        runner = LoopRunner(loop, llm=scripted([attack, fine], seen), tools=[bank.tool])
        out = runner.invoke({"request": {}}, thread_id="t")
        assert isinstance(out, LoopResult)
        assert bank.refunds == [50]  # the attacked amount never reached the tool
        assert len(seen) == 1 and complaint in seen[0]  # the model was told why, and tried again
        outcomes.append((bank.refunds, out.context["decide"]))
    assert outcomes[0] == outcomes[1]  # the JSON-loaded loop behaves exactly like the code-defined one


def test_a_hand_written_json_schema_is_enforced_too() -> None:
    schema = {
        "title": "Refund",
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "minLength": 1},
            "amount": {"type": "integer", "minimum": 1, "maximum": 100},
            "items": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "uniqueItems": True},
            "reason": {"enum": ["damaged", "late"]},
        },
        "required": ["order_id", "amount", "reason"],
        "additionalProperties": False,
    }
    attacks = [
        {"order_id": "O", "amount": 101, "reason": "late"},
        {"order_id": "O", "amount": 0, "reason": "late"},
        {"order_id": "O", "amount": 5, "reason": "late", "approved_by": "admin"},  # an extra field
        {"order_id": "O", "amount": 5, "reason": "late", "items": ["a", "a"]},
        {"order_id": "O", "amount": 5, "reason": "late", "items": ["a", "b", "c"]},
        {"order_id": "", "amount": 5, "reason": "late"},
    ]
    data = refund_loop(schema).to_json()
    for attack in attacks:
        bank, seen = Bank(), []
        runner = LoopRunner(
            Loop.from_json(data),
            llm=scripted([attack, {"order_id": "O", "amount": 7, "reason": "late"}], seen),
            tools=[bank.tool],
        )
        runner.invoke({"request": {}}, thread_id="t")
        assert bank.refunds == [7] and len(seen) == 1, attack


def test_an_output_schema_with_a_keyword_we_cannot_enforce_is_refused_not_ignored() -> None:
    for bad in (
        {"type": "object", "properties": {"a": {"type": "string", "not": {"const": "x"}}}},
        {"type": "object", "properties": {"a": {"type": "string", "format": "email-ish"}}},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"type": "string"},  # not an object
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"$ref": "#/$defs/A"}}},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=x)y"}}},  # lookbehind: not linear
    ):
        with pytest.raises(LoopDefinitionError, match="output schema"):
            agent_step(output=bad, next="end")
        data = refund_loop(Refund).to_json()
        data["steps"]["decide"]["output"] = bad
        with pytest.raises(LoopDefinitionError, match="output schema"):
            Loop.from_json(data)


# --- definitions too big, too deep, or the wrong shape ----------------------------------------------------------


def valid() -> dict[str, Any]:
    return define_loop(
        "support",
        start="triage",
        steps={
            "triage": agent_step(
                prompt="Classify.", output=Refund, next=[when("triage.amount > 10.0", "pay"), otherwise("end")]
            ),
            "pay": tool_step("issue_refund", input={"order_id": ctx("triage.order_id"), "amount": 1}, next="end"),
        },
        permissions=ALLOW,
        result={"data": ctx("pay")},
    ).to_json()


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


def refused(data: Any) -> LoopDefinitionError:
    with pytest.raises(LoopDefinitionError) as caught:
        Loop.from_json(data)
    return caught.value


def test_a_huge_invalid_when_is_a_definition_error_not_a_panic_or_a_crash() -> None:
    for expression in (
        "a" * 65_536 + " ==",  # made the CEL library panic (PanicException, a BaseException)
        "x." * 16_000 + "y",  # made the CEL parser overflow the stack (the process died)
        "1 + " * 20_000 + "1",
        "(" * 40_000,
    ):
        data = valid()
        data["steps"]["triage"]["next"][0]["when"] = expression
        error = refused(data)
        assert "characters" in str(error) and error.step_key in ("triage", None)
        assert len(str(error)) < 1_000  # the message does not echo the attack back
        with pytest.raises(LoopDefinitionError, match="limit is 1024"):
            when(expression, "end")  # the same limit in code


def test_deep_nesting_is_a_definition_error_not_a_recursion_error() -> None:
    data = valid()
    data["steps"]["pay"]["input"]["order_id"] = nested(100_000)
    assert "nesting deeper than 32" in str(refused(data))
    text = json.dumps(valid())[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert "RecursionError" in str(refused(text))  # json's own decoder recursion, caught where JSON is parsed
    text = json.dumps(valid())[:-1] + ', "x": ' + "[" * 500 + "]" * 500 + "}"
    assert "nesting deeper than 32" in str(refused(text))
    deep_schema = valid()
    deep_schema["steps"]["triage"]["output"] = {"type": "object", "properties": {"a": nested(50)}}
    refused(deep_schema)
    with pytest.raises(LoopDefinitionError, match="nested deeper"):
        tool_step("t", input={"x": nested(5_000)}, next="end")  # in code, too


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["steps"].__setitem__("triage", ["not", "a", "step"]),  # a list where a step object belongs
        lambda d: d.__setitem__("steps", [d["steps"]["triage"]]),
        lambda d: d["steps"].__setitem__("pay", "tool"),
        lambda d: d["steps"]["triage"].__setitem__("next", 7),
        lambda d: d["steps"]["triage"].__setitem__("next", [["when", "x"]]),
        lambda d: d["steps"]["triage"].__setitem__("tools", "read"),
        lambda d: d["steps"]["triage"].__setitem__("tool_choice", {"name": ["x"]}),
        lambda d: d["steps"]["triage"].__setitem__("prompt", {"text": "hi"}),
        lambda d: d["steps"]["triage"].__setitem__("surprise", True),
        lambda d: d["steps"]["pay"].__setitem__("input", ["order_id"]),
        lambda d: d["steps"]["pay"].__setitem__("save_as", "request"),
        lambda d: d.__setitem__("permissions", {"id": "all"}),
        lambda d: d["permissions"].__setitem__(0, "allow everything"),
        lambda d: d["permissions"][0].__setitem__("match", {"tool": {"$ne": None}}),
        lambda d: d.__setitem__("result", {"data": ctx("pay"), "debug": ctx("request")}),
        lambda d: d.__setitem__("protected_roots", "request"),
        lambda d: d.__setitem__("hooks", {"loop:start": [{"type": "command", "argv": "rm -rf /"}]}),
        lambda d: d.__setitem__("hooks", {"loop:start": [{"type": "command", "argv": [{"$context": "x"}]}]}),
        lambda d: d.__setitem__("version", 99),
        lambda d: d.__setitem__("start", ["triage"]),
        lambda d: d.__setitem__("name", None),
        lambda d: d["steps"].__setitem__("x" * 5_000, d["steps"]["pay"]),
        lambda d: d["steps"]["triage"].__setitem__("prompt", "p" * 1_000_000),
        lambda d: d["steps"].update({f"s{i}": copy.deepcopy(d["steps"]["pay"]) for i in range(300)}),
        lambda d: d.__setitem__("result", {"data": [0] * 60_000}),
        lambda d: d["steps"]["pay"]["input"].__setitem__("amount", float("nan")),
        lambda d: d["steps"]["pay"]["input"].__setitem__("amount", 10**100),
        lambda d: d["steps"]["pay"]["input"].__setitem__("amount", b"bytes"),
        lambda d: d["steps"]["pay"]["input"].__setitem__(1, "non-string key"),
    ],
)
def test_every_malformed_definition_is_a_definition_error(mutate: Any) -> None:
    data = valid()
    mutate(data)
    refused(data)
    try:
        text = json.dumps(data)
    except (TypeError, ValueError):
        return  # not expressible as JSON text
    if json.loads(text) == data:  # the same definition as text
        refused(text)


def test_huge_text_is_refused_before_it_is_parsed() -> None:
    assert "the limit is" in str(refused(" " * (2 << 20)))
    assert "not JSON" in str(refused(b"\xff\xfe not json"))
    refused(None)
    refused(42)


def test_random_mutations_of_a_valid_definition_load_or_fail_with_a_definition_error_only() -> None:
    rng = random.Random(20261201)
    hostile: list[Any] = [
        None,
        True,
        -1,
        2**70,
        1.5,
        float("inf"),
        "",
        "end",
        "request",
        "x" * 70_000,
        [],
        {},
        [[[]]],
        {"$context": "request"},
        {"$context": ".."},
        nested(40),
        ["a"] * 10,
        {"type": "agent"},
        {"type": "tool"},
    ]
    outcomes = {"loaded": 0, "refused": 0}
    for _ in range(400):
        data = valid()
        for _ in range(rng.randint(1, 3)):
            paths = list(_paths(data))
            parent, key = rng.choice(paths)
            parent[key] = copy.deepcopy(rng.choice(hostile))
        try:
            Loop.from_json(data)
            outcomes["loaded"] += 1
        except LoopDefinitionError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 300 and sum(outcomes.values()) == 400


def _paths(value: Any) -> Any:
    stack = [value]
    while stack:
        item = stack.pop()
        children = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for key, child in children:
            yield item, key
            stack.append(child)
