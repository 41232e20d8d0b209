"""Bindings, never interpolation; missing paths, protected roots, result projection and CEL transitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from pydantic import BaseModel

from ai_utils import (
    AgentAction,
    FakeChatModel,
    LoopError,
    LoopResult,
    LoopRunner,
    ToolResult,
    UserError,
    agent_step,
    ctx,
    define_loop,
    otherwise,
    permission,
    tool_step,
    when,
)

ALLOW = [permission("all", resource="tool", action="call", effect="allow", match={"tool": "*"})]


class Echo:
    def __init__(self) -> None:
        self.inputs: list[dict[str, Any]] = []

        @tool
        def echo(payload: dict[str, Any]) -> dict[str, Any]:
            """Return the payload."""
            self.inputs.append(payload)
            return {"got": payload, "url": payload.get("url", "https://example.com/ok")}

        self.tool = echo


def echo_loop(payload: Any, **kwargs: Any) -> Any:
    return define_loop(
        "echo",
        start="call",
        steps={"call": tool_step("echo", input={"payload": payload}, save_as="out", next="end")},
        permissions=ALLOW,
        **kwargs,
    )


def test_only_exact_bindings_are_replaced_and_strings_are_never_templated() -> None:
    echo = Echo()
    payload = {
        "id": ctx("request.order_id"),
        "nested": [{"deep": ctx("request.customer.name")}, "{request.order_id}"],
        "template": "${request.order_id} {{request.order_id}} $context",
        "not_a_binding": {"$context": "request.order_id", "extra": 1},
    }
    runner = LoopRunner(echo_loop(payload, result={"data": ctx("out.got")}), tools=[echo.tool])
    out = runner.invoke({"request": {"order_id": "A-1", "customer": {"name": "Ada"}}}, thread_id="t")
    assert isinstance(out, LoopResult)
    assert out.data == {
        "id": "A-1",
        "nested": [{"deep": "Ada"}, "{request.order_id}"],
        "template": "${request.order_id} {{request.order_id}} $context",
        "not_a_binding": {"$context": "request.order_id", "extra": 1},
    }


def test_a_missing_path_fails_the_run_with_a_loop_error_naming_it() -> None:
    echo = Echo()
    runner = LoopRunner(echo_loop(ctx("request.order_id")), tools=[echo.tool])
    with pytest.raises(LoopError, match=r"ctx\('request.order_id'\)") as caught:
        runner.invoke({"request": {"orderId": "A-1"}}, thread_id="t")
    assert caught.value.path == "request.order_id" and caught.value.step_key == "call"
    assert echo.inputs == [] and runner.state("t") == "failed"


def test_a_missing_result_path_is_a_loop_error_too() -> None:
    echo = Echo()
    runner = LoopRunner(echo_loop({"v": 1}, result={"data": ctx("out.nope")}), tools=[echo.tool])
    with pytest.raises(LoopError, match="out.nope") as caught:
        runner.invoke({"request": {}}, thread_id="t")
    assert caught.value.path == "out.nope"


def test_caller_seeded_roots_cannot_be_overwritten_by_steps() -> None:
    echo = Echo()
    runner = LoopRunner(echo_loop({"v": 1}), tools=[echo.tool])
    with pytest.raises(UserError, match="'out'"):
        runner.invoke({"request": {}, "out": {"approved": True}}, thread_id="t")
    assert echo.inputs == []


def test_an_open_url_action_resolving_to_a_non_https_url_fails_the_projection() -> None:
    echo = Echo()
    result = {"presentation": {"text": "done", "actions": [{"id": "p", "type": "open_url", "url": ctx("out.url")}]}}
    runner = LoopRunner(echo_loop({"url": ctx("request.url")}, result=result), tools=[echo.tool])
    ok = runner.invoke({"request": {"url": "https://preview.example.com/1"}}, thread_id="ok")
    assert isinstance(ok, LoopResult)
    assert ok.presentation["actions"][0]["url"] == "https://preview.example.com/1"
    with pytest.raises(LoopError, match="only https://") as caught:
        runner.invoke({"request": {"url": "javascript:alert(document.cookie)"}}, thread_id="bad")
    assert "'javascript:'" in str(caught.value) and "cookie" not in str(caught.value)


def test_a_tool_step_input_that_does_not_fit_the_tool_schema_is_a_loop_error_without_the_value() -> None:
    echo = Echo()
    runner = LoopRunner(echo_loop(ctx("request.token")), tools=[echo.tool])
    with pytest.raises(LoopError, match="does not match the tool's schema") as caught:
        runner.invoke({"request": {"token": "sk-secret-value-123"}}, thread_id="t")
    assert "sk-secret" not in str(caught.value) and caught.value.step_key == "call"
    assert echo.inputs == []


def routed(expr: str, llm_reply: dict[str, Any]) -> Any:
    return define_loop(
        "route",
        start="judge",
        steps={
            "judge": agent_step(prompt="Judge.", next=[when(expr, "yes"), otherwise("no")]),
            "yes": tool_step("echo", input={"payload": {"branch": "yes"}}, next="end"),
            "no": tool_step("echo", input={"payload": {"branch": "no"}}, next="end"),
        },
        permissions=ALLOW,
        result={"data": ctx("yes")},
    )


def run_route(expr: str, request: dict[str, Any], text: str = "fine") -> tuple[str, Any]:
    echo = Echo()
    runner = LoopRunner(routed(expr, {}), llm=FakeChatModel([text]), tools=[echo.tool])
    out = runner.invoke({"request": request}, thread_id="t")
    assert isinstance(out, LoopResult)
    return echo.inputs[-1]["branch"], out


def test_when_expressions_are_cel_over_the_context() -> None:
    assert run_route('request.amount > 10.5 && judge.text == "fine"', {"amount": 42})[0] == "yes"
    assert run_route("request.amount > 100", {"amount": 42})[0] == "no"
    assert run_route('"vip" in request.tags', {"tags": ["vip"]})[0] == "yes"
    assert run_route("has(request.coupon)", {})[0] == "no"


def test_a_when_without_match_or_otherwise_is_a_loop_error() -> None:
    loop = define_loop(
        "strict",
        start="judge",
        steps={"judge": agent_step(next=[when("judge.text == 'a'", "end")])},
        permissions=ALLOW,
    )
    runner = LoopRunner(loop, llm=FakeChatModel(["b"]))
    with pytest.raises(LoopError, match="no transition matched") as caught:
        runner.invoke({"request": {}}, thread_id="t")
    assert caught.value.step_key == "judge"


INJECTIONS = [
    '__import__("os").system("touch PWNED")',
    'request.text == "" || __import__("os").system("touch PWNED") == 0',
    "open('PWNED', 'w')",
    "request.__class__",
    "eval(request.text)",
]


@pytest.mark.parametrize("expr", INJECTIONS)
def test_python_in_a_when_expression_is_refused_or_inert(
    expr: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        loop = routed(expr, {})
    except Exception as error:  # refused at define_loop: not CEL
        assert type(error).__name__ == "LoopDefinitionError"
    else:
        runner = LoopRunner(loop, llm=FakeChatModel(["fine"]), tools=[Echo().tool])
        with pytest.raises(LoopError, match="failed on the context"):
            runner.invoke({"request": {"text": "x"}}, thread_id="t")
    assert not (tmp_path / "PWNED").exists()


def test_payloads_in_context_values_are_data_not_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    payload = '") || __import__("os").system("touch PWNED") || ("'
    branch, out = run_route('request.text == "refund"', {"text": payload}, text=payload)
    assert branch == "no"
    assert out.context["request"]["text"] == payload and out.context["judge"]["text"] == payload
    branch, _ = run_route("request.text == judge.text", {"text": payload}, text=payload)
    assert branch == "yes"  # compared as strings, nothing else
    assert not (tmp_path / "PWNED").exists()
    assert json.dumps(out.context)  # the context stays plain JSON data


def test_a_tool_steps_tool_result_is_stored_as_the_json_the_model_would_see() -> None:
    @tool
    def find(order_id: str) -> ToolResult:
        """Find an order."""
        return ToolResult("error", f"No order {order_id}.", data={"id": order_id}, action=AgentAction("nav", {}))

    loop = define_loop(
        "f",
        start="a",
        steps={"a": tool_step("find", input={"order_id": ctx("request.id")}, next="end")},
        permissions=ALLOW,
    )
    out = LoopRunner(loop, tools=[find]).invoke({"request": {"id": "Z"}}, thread_id="t")
    assert out.context["a"] == {"status": "error", "message": "No order Z.", "data": {"id": "Z"}}


def test_a_tool_step_whose_tool_raises_fails_the_run_with_a_loop_error() -> None:
    @tool
    def flaky(order_id: str) -> str:
        """Always fails."""
        raise RuntimeError(f"payment backend down for {order_id}")

    loop = define_loop(
        "f",
        start="a",
        steps={"a": tool_step("flaky", input={"order_id": ctx("request.secret")}, next="end")},
        permissions=ALLOW,
    )
    runner = LoopRunner(loop, tools=[flaky])
    with pytest.raises(LoopError, match=r"Step 'a': the tool 'flaky' raised RuntimeError") as caught:
        runner.invoke({"request": {"secret": "sk-do-not-show"}}, thread_id="t")
    assert caught.value.step_key == "a" and isinstance(caught.value.__cause__, RuntimeError)
    assert "sk-do-not-show" not in str(caught.value)  # the exception's text may quote the context: type only
    assert runner.state("t") == "failed" and [(r.state, r.error) for r in runner.runs()] == [("failed", "LoopError")]
    for run in (runner.stream({"request": {"secret": "x"}}, thread_id="s"),):
        with pytest.raises(LoopError, match="raised RuntimeError"):
            list(run)
    assert runner.state("s") == "failed"
    with pytest.raises(UserError, match="no run"):
        runner.state("never-ran")


def test_a_run_cut_short_by_a_raising_tool_continues_from_its_last_stored_step() -> None:
    calls: list[str] = []

    @tool
    def fetch(order_id: str) -> str:
        """Fetch an order."""
        calls.append("fetch")
        return "order 1"

    @tool
    def charge(order_id: str) -> str:
        """Charge an order; the first call fails."""
        calls.append("charge")
        if calls.count("charge") == 1:
            raise RuntimeError("payment backend down")
        return "charged"

    loop = define_loop(
        "retry",
        start="fetch",
        steps={
            "fetch": tool_step("fetch", input={"order_id": "1"}, next="charge"),
            "charge": tool_step("charge", input={"order_id": "1"}, next="end"),
        },
        permissions=ALLOW,
        result={"data": ctx("charge")},
    )
    runner = LoopRunner(loop, tools=[fetch, charge])
    with pytest.raises(LoopError, match="'charge' raised RuntimeError"):
        runner.invoke({"request": {}}, thread_id="t")
    assert runner.state("t") == "failed"
    with pytest.raises(LoopError, match="failed in step 'charge' \\(RuntimeError\\)") as caught:
        runner.result("t")
    assert caught.value.step_key == "charge"
    out = runner.invoke(thread_id="t")
    assert isinstance(out, LoopResult) and out.data == "charged"
    assert calls == ["fetch", "charge", "charge"] and runner.state("t") == "completed"
    with pytest.raises(UserError, match="Nothing to run"):
        runner.invoke(thread_id="t")


def test_a_when_that_is_not_a_condition_fails_without_showing_the_value() -> None:
    loop = define_loop(
        "nb",
        start="judge",
        steps={"judge": agent_step(next=[when("request.token", "end"), otherwise("end")])},
        permissions=ALLOW,
    )
    runner = LoopRunner(loop, llm=FakeChatModel(["ok"]))
    with pytest.raises(LoopError, match="gave a str, not a bool") as caught:
        runner.invoke({"request": {"token": "sk-live-secret"}}, thread_id="t")
    assert "sk-live-secret" not in str(caught.value)


class Verdict(BaseModel):
    ok: bool


def verdict_loop() -> Any:
    return define_loop(
        "v",
        start="judge",
        steps={"judge": agent_step(output=Verdict, next=[when("judge.ok", "end"), otherwise("end")])},
        permissions=ALLOW,
        result={"data": ctx("judge")},
    )


def test_a_structured_answer_given_as_json_text_is_validated_into_the_output() -> None:
    runner = LoopRunner(verdict_loop(), llm=FakeChatModel(['```json\n{"ok": true}\n```']))
    out = runner.invoke({"request": {}}, thread_id="t")
    assert isinstance(out, LoopResult) and out.data == {"ok": True}
    bad = LoopRunner(verdict_loop(), llm=FakeChatModel(["yes, it is fine"]))
    with pytest.raises(LoopError, match=r"needs a structured answer \(Verdict\)") as caught:
        bad.invoke({"request": {}}, thread_id="t")
    assert caught.value.step_key == "judge"


def test_a_cycle_runs_its_agent_steps_afresh_on_each_visit_until_it_exits() -> None:
    loop = define_loop(
        "review",
        start="draft",
        steps={
            "draft": agent_step(prompt="Draft.", next="review"),
            "review": agent_step(prompt="Review.", next=[when('review.text == "ok"', "end"), otherwise("draft")]),
        },
        permissions=ALLOW,
        result={"presentation": {"text": ctx("draft.text")}},
    )
    llm = FakeChatModel(["v1", "again", "v2", "ok"])
    out = LoopRunner(loop, llm=llm).invoke({"request": {}}, thread_id="t")
    assert isinstance(out, LoopResult) and out.presentation == {"text": "v2"}
    assert [len(call) for call in llm.calls] == [2, 2, 2, 2]  # system + this visit's context, nothing older
    assert '"again"' in llm.calls[2][-1].text  # the second draft sees the review


async def test_a_raising_tool_step_is_a_loop_error_in_async_runs_too() -> None:
    @tool
    def flaky(order_id: str) -> str:
        """Always fails."""
        raise ValueError("bad order")

    loop = define_loop(
        "fa", start="a", steps={"a": tool_step("flaky", input={"order_id": "1"}, next="end")}, permissions=ALLOW
    )
    runner = LoopRunner(loop, tools=[flaky])
    with pytest.raises(LoopError, match="'flaky' raised ValueError") as caught:
        await runner.ainvoke({"request": {}}, thread_id="a")
    assert isinstance(caught.value.__cause__, ValueError)
    with pytest.raises(LoopError, match="'flaky' raised ValueError"):
        async for _ in runner.astream({"request": {}}, thread_id="b"):
            pass
    assert await runner.astate("a") == "failed" and await runner.astate("b") == "failed"
