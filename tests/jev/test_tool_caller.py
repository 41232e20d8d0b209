"""JevToolCaller end to end over real HTTP to the fake Jev server: the flow, call counts, gate, history."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from ai_utils.jev import (
    ConfidenceGate,
    JevGated,
    JevNoParamOptionsError,
    JevParamsError,
    JevReturn,
    JevTool,
)
from ai_utils.jev.tool_caller import JevToolCaller
from ai_utils.testing.jev_server import FakeJevServer

SECRET = "sk-SENTINEL-7f3a9c"


class Ctx(BaseModel):
    tenant: str
    api_token: str


@dataclasses.dataclass(frozen=True)
class Candidate:
    id: str
    name: str
    birth_year: int


MAX_A = Candidate("c-1", "Max Müller", 1999)
MAX_B = Candidate("c-2", "Max Müller", 2002)


def make(jev: FakeJevServer, tools: list[Any], **kwargs: Any) -> JevToolCaller:
    return JevToolCaller(tools=tools, api_key=jev.api_key, base_url=jev.url, **kwargs)


def healthcheck(**_: Any) -> str:
    return "ok"


def test_a_tool_without_params_runs_after_exactly_one_jev_call_with_empty_params(jev: FakeJevServer) -> None:
    seen: list[dict[str, Any]] = []

    def check(**kwargs: Any) -> str:
        seen.append(kwargs)
        return "reachable"

    caller = make(jev, [JevTool("healthcheck", "Checks the system.", check), JevTool("other", "Other.", healthcheck)])
    out = caller.invoke({"question": "Is the system up?"})

    assert isinstance(out, JevReturn)
    assert (out.kind, out.value, out.tool.name, out.params, out.rejected) == (
        "return",
        "reachable",
        "healthcheck",
        {},
        False,
    )
    assert len(jev.requests) == 1
    assert seen == [
        {
            "context": None,
            "thread_id": None,
            "params": {},
            "state": {
                "system_prompt": seen[0]["state"]["system_prompt"],
                "message_history": [{"role": "user", "content": {"question": "Is the system up?"}}],
            },
        }
    ]


def test_the_first_call_is_a_choice_over_tool_names_with_descriptions_and_the_state_shape(jev: FakeJevServer) -> None:
    caller = make(
        jev,
        [JevTool("a", "Does A.", healthcheck), JevTool("b", "Does B.", healthcheck)],
        prompt="Select the CRM operation.",
    )
    caller.invoke({"question": "do b", "locale": "de-DE"})

    body = jev.requests[0].body
    assert body["questions"]["tool"]["type"] == "choice"
    assert body["questions"]["tool"]["criteria"] == {"a": "Does A.", "b": "Does B."}
    assert body["state"]["system_prompt"].startswith("Select the CRM operation.\n\n")
    assert body["state"]["message_history"] == [{"role": "user", "content": {"question": "do b", "locale": "de-DE"}}]


def test_jev_picks_the_tool_and_its_confidence_is_reported(jev: FakeJevServer) -> None:
    jev.answer("tool", probabilities={"a": 0.2, "b": 0.8})
    caller = make(jev, [JevTool("a", "Does A.", lambda: "A"), JevTool("b", "Does B.", lambda: "B")])
    out = caller.invoke({"question": "do b"})
    assert (out.tool.name, out.tool.confidence, out.value) == ("b", 0.6, "B")  # type: ignore[union-attr]


def test_params_with_one_candidate_each_are_taken_deterministically_after_one_call(jev: FakeJevServer) -> None:
    got: dict[str, Any] = {}

    def fetch(params: dict[str, Any]) -> str:
        got.update(params)
        return params["candidate"].id

    tool = JevTool("get", "Gets a candidate.", fetch, params={"candidate": [MAX_B], "permission": ["read"]})
    out = make(jev, [tool, JevTool("other", "Other.", healthcheck)]).invoke({"question": "get Max"})

    assert isinstance(out, JevReturn)
    assert len(jev.requests) == 1
    assert got["candidate"] is MAX_B and got["permission"] == "read"
    assert out.params["candidate"].value is MAX_B
    assert out.params["candidate"].confidence == 1.0 and out.params["permission"].confidence == 1.0


def test_ambiguous_params_are_picked_together_in_exactly_one_second_call_as_original_objects(
    jev: FakeJevServer,
) -> None:
    jev.answer("tool", choice="get")
    jev.answer("candidate", choice="c1")
    jev.answer("permission", choice="write")
    got: dict[str, Any] = {}

    def fetch(*, params: dict[str, Any], context: Ctx) -> dict[str, Any]:
        got.update(params)
        return {"id": params["candidate"].id, "tenant": context.tenant}

    tool = JevTool(
        "get",
        "Gets a candidate.",
        fetch,
        params=lambda context: {"candidate": [MAX_A, MAX_B], "permission": ["read", "write"], "fixed": [1]},
    )
    caller = make(jev, [JevTool("other", "Other.", healthcheck), tool], context_schema=Ctx)
    out = caller.invoke(
        {"question": "Welcher Max Müller wurde 2002 geboren?"}, context={"tenant": "acme", "api_token": SECRET}
    )

    assert isinstance(out, JevReturn)
    assert len(jev.requests) == 2
    assert got["candidate"] is MAX_B and got["permission"] == "write" and got["fixed"] == 1
    assert out.value == {"id": "c-2", "tenant": "acme"}
    assert out.params["candidate"].value is MAX_B
    assert out.params["candidate"].confidence == 0.8
    second = jev.requests[1].body["questions"]
    assert set(second) == {"candidate", "permission"}  # the single-candidate param is not asked
    assert second["candidate"]["criteria"] == {
        "c0": {"id": "c-1", "name": "Max Müller", "birth_year": 1999},
        "c1": {"id": "c-2", "name": "Max Müller", "birth_year": 2002},
    }
    assert second["permission"]["criteria"] == {"read": None, "write": None}
    assert json.loads(out.model_dump_json())["params"]["candidate"]["value"]["birth_year"] == 2002


def test_params_are_resolved_only_for_the_picked_tool(jev: FakeJevServer) -> None:
    jev.answer("tool", choice="b")
    resolved: list[str] = []

    def provider(name: str) -> Any:
        def params() -> dict[str, list[str]]:
            resolved.append(name)
            return {"x": ["only"]}

        return params

    caller = make(
        jev,
        [JevTool("a", "A.", healthcheck, params=provider("a")), JevTool("b", "B.", healthcheck, params=provider("b"))],
    )
    caller.invoke({"q": "b"})
    assert resolved == ["b"]


def test_an_empty_candidate_list_raises_jev_no_param_options_error(jev: FakeJevServer) -> None:
    ran: list[int] = []
    tool = JevTool("find", "Finds a person.", lambda: ran.append(1), params=lambda: {"person": []})
    with pytest.raises(JevNoParamOptionsError) as caught:
        make(jev, [tool]).invoke({"q": "Finde Max Müller"})
    assert (caught.value.code, caught.value.tool_name, caught.value.parameter_name) == (
        "JEV_NO_PARAM_OPTIONS",
        "find",
        "person",
    )
    assert ran == [] and len(jev.requests) == 1


def test_candidates_that_are_not_lists_raise_type_error(jev: FakeJevServer) -> None:
    with pytest.raises(TypeError, match="must be a list"):
        make(jev, [JevTool("t", "T.", healthcheck, params=lambda: {"x": "read"})]).invoke({"q": "x"})
    with pytest.raises(TypeError, match="must be .*a mapping"):
        make(jev, [JevTool("t", "T.", healthcheck, params=lambda: ["read"])]).invoke({"q": "x"})
    with pytest.raises(JevParamsError):
        make(jev, [JevTool("t", "T.", healthcheck, params={"x": "read"})])


async def test_async_params_and_func_work_from_sync_invoke_and_from_ainvoke(jev: FakeJevServer) -> None:
    async def params(thread_id: str | None) -> dict[str, list[str]]:
        return {"who": ["ann", "bob"]}

    async def func(params: dict[str, Any]) -> str:
        return f"hi {params['who']}"

    jev.answer("who", choice="bob")
    caller = make(jev, [JevTool("greet", "Greets.", func, params=params)])
    out = await caller.ainvoke({"q": "greet bob"})
    assert out.value == "hi bob"  # type: ignore[union-attr]
    assert len(jev.requests) == 2


def test_async_callables_run_from_sync_invoke(jev: FakeJevServer) -> None:
    async def params() -> dict[str, list[str]]:
        return {"who": ["ann", "bob"]}

    async def func(params: dict[str, Any]) -> str:
        return f"hi {params['who']}"

    out = make(jev, [JevTool("greet", "Greets.", func, params=params)]).invoke({"q": "greet ann"})
    assert out.value == "hi ann"  # type: ignore[union-attr]


def test_a_confidence_below_the_default_threshold_returns_gated_and_never_runs_func(jev: FakeJevServer) -> None:
    ran: list[int] = []
    jev.answer("tool", probabilities={"a": 0.7, "b": 0.3})  # confidence 0.4 < 0.5
    caller = make(jev, [JevTool("a", "A.", lambda: ran.append(1)), JevTool("b", "B.", healthcheck)])
    out = caller.invoke({"q": "?"})
    assert isinstance(out, JevGated)
    assert out.kind == "gated" and out.tool.name == "a"
    assert [b.model_dump() for b in out.below] == [{"scope": "tool", "confidence": 0.4, "required": 0.5}]
    assert out.below[0]["scope"] == "tool"
    assert ran == []


def test_the_gate_checks_params_with_per_tool_thresholds_and_min_confidence_zero_disables_it(
    jev: FakeJevServer,
) -> None:
    jev.answer("tool", choice="pick")
    jev.answer("x", probabilities={"u": 0.6, "v": 0.4})  # confidence 0.2
    tools = [
        JevTool("pick", "Picks.", lambda params: params["x"], params={"x": ["u", "v"]}),
        JevTool("o", "O.", healthcheck),
    ]

    gated = make(jev, tools, confidence_gate={"min_confidence": 0.1, "tools": {"pick": 0.85}}).invoke({"q": "u"})
    assert isinstance(gated, JevGated)
    assert [(b.scope, b.required) for b in gated.below] == [("tool", 0.85), ("params.x", 0.85)]
    assert gated.params["x"].value == "u"

    passed = make(jev, tools, confidence_gate=ConfidenceGate(min_confidence=0)).invoke({"q": "u"})
    assert isinstance(passed, JevReturn) and passed.value == "u"


def test_a_checkpointer_keeps_earlier_requests_and_tool_results_in_the_history(jev: FakeJevServer) -> None:
    tool = JevTool("lookup", "Looks up.", lambda params: {"found": params["id"]}, params={"id": [7]})
    caller = make(jev, [tool, JevTool("o", "O.", healthcheck)], checkpointer=InMemorySaver())
    caller.invoke({"q": "first"}, thread_id="t1")
    caller.invoke({"q": "second"}, thread_id="t1")
    caller.invoke({"q": "elsewhere"}, thread_id="t2")

    assert jev.requests[1].body["state"]["message_history"] == [
        {"role": "user", "content": {"q": "first"}},
        {"role": "assistant", "content": {"tool": "lookup", "params": {"id": 7}, "result": {"found": 7}}},
        {"role": "user", "content": {"q": "second"}},
    ]
    assert jev.requests[2].body["state"]["message_history"] == [{"role": "user", "content": {"q": "elsewhere"}}]


def test_without_a_checkpointer_every_call_starts_with_only_its_request(jev: FakeJevServer) -> None:
    caller = make(jev, [JevTool("a", "A.", healthcheck)])
    caller.invoke({"q": "one"}, thread_id="t")
    caller.invoke({"q": "two"}, thread_id="t")
    assert jev.requests[1].body["state"]["message_history"] == [{"role": "user", "content": {"q": "two"}}]


def test_debug_adds_metadata_with_usage_summed_over_both_calls(jev: FakeJevServer) -> None:
    jev.answer("x", choice="v")
    caller = make(jev, [JevTool("pick", "Picks.", lambda params: params["x"], params={"x": ["u", "v"]})])
    out = caller.invoke({"q": "v please"}, debug=True)
    assert out.metadata is not None
    meta = out.metadata
    assert meta.selected_tool is not None and meta.selected_tool["name"] == "pick"
    assert meta.selected_params["x"]["value"] == "v" and meta.selected_params["x"]["candidates"] == 2
    assert meta.arguments == {"x": "v"}
    replies = [jev.requests[0], jev.requests[1]]
    expected_input = sum(-(-len(r.raw) // 4) + 270 for r in replies)
    assert meta.usage["calls"] == 2 and meta.usage["input_tokens"] == expected_input
    assert meta.usage["cost"] == pytest.approx(expected_input * 0.042e-6)
    assert meta.state == jev.requests[0].body["state"]
    assert make(jev, [JevTool("a", "A.", healthcheck)]).invoke({"q": "x"}).metadata is None


def test_the_output_is_json_serialisable(jev: FakeJevServer) -> None:
    class Weird:
        def __init__(self) -> None:
            self.a = 1

    jev.answer("w", choice="c0")
    tool = JevTool("t", "T.", lambda params: params["w"], params={"w": [Weird(), Weird()]})
    out = make(jev, [tool]).invoke({"q": "x"}, debug=True)
    data = json.loads(out.model_dump_json())
    assert data["kind"] == "return" and data["value"] == {"a": 1} and data["params"]["w"]["value"] == {"a": 1}


def test_timeouts_reach_the_jev_call(jev: FakeJevServer) -> None:
    from ai_utils.jev.errors import JevTimeoutError

    jev.delay(1.0)
    with pytest.raises(JevTimeoutError):
        make(jev, [JevTool("a", "A.", healthcheck)]).invoke({"q": "x"}, timeout=0.2)


def test_an_error_in_func_propagates_and_the_failed_turn_is_not_in_the_history(jev: FakeJevServer) -> None:
    calls: list[int] = []

    def broken() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("backend down")
        return "up again"

    caller = make(jev, [JevTool("a", "A.", broken)], checkpointer=InMemorySaver())
    with pytest.raises(ValueError, match="backend down"):
        caller.invoke({"q": "first"}, thread_id="t")
    assert caller.invoke({"q": "second"}, thread_id="t").value == "up again"  # type: ignore[union-attr]
    assert jev.requests[1].body["state"]["message_history"] == [{"role": "user", "content": {"q": "second"}}]
