"""JevToolCaller: caller mistakes, call_tool's bounded validation, and `context` never leaving the process."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from ai_utils.exceptions import AiUtilsError, UserError
from ai_utils.jev import JevGated, JevNoParamOptionsError, JevReturn, JevTool, JevToolCaller
from ai_utils.testing.jev_server import FakeJevServer

SECRET = "sk-SENTINEL-7f3a9c"


class Ctx(BaseModel):
    tenant: str
    api_token: str


def ok(**_: Any) -> str:
    return "ok"


def make(jev: FakeJevServer, tools: list[Any] | None = None, **kwargs: Any) -> JevToolCaller:
    return JevToolCaller(
        tools=tools if tools is not None else [JevTool("a", "A.", ok)], api_key=jev.api_key, base_url=jev.url, **kwargs
    )


@pytest.mark.parametrize(
    ("tools", "match"),
    [
        ([], "at least one tool"),
        ([JevTool("a", "A.", ok), JevTool("a", "B.", ok)], "Duplicate tool names"),
        ([JevTool("", "A.", ok)], "non-empty string"),
        ([JevTool("a", "  ", ok)], "non-empty `description`"),
        ([JevTool("a", "A.", "not callable")], "must be callable"),  # type: ignore[arg-type]
        ([{"name": "a", "description": "A.", "func": ok, "extra": 1}], "unknown"),
        ([{"name": "a", "func": ok}], "needs `name`, `description` and `func`"),
        ([42], "Cannot use int"),
        (JevTool("a", "A.", ok), "must be a list"),
    ],
)
def test_invalid_tools_are_user_errors(jev: FakeJevServer, tools: Any, match: str) -> None:
    with pytest.raises(UserError, match=match):
        make(jev, tools)


def test_tools_may_be_mappings(jev: FakeJevServer) -> None:
    caller = make(jev, [{"name": "a", "description": "A.", "func": lambda: 5, "params": {"x": [1]}}])
    assert [t.name for t in caller.tools] == ["a"]
    assert caller.invoke({"q": "x"}).value == 5  # type: ignore[union-attr]


def test_constructor_option_errors(jev: FakeJevServer) -> None:
    with pytest.raises(UserError, match="checkpointer"):
        make(jev, interrupt_on={"a": "Ok?"})
    with pytest.raises(UserError, match="non-empty str"):
        make(jev, interrupt_on={"a": ""}, checkpointer=InMemorySaver())
    with pytest.raises(UserError, match="must map tool names"):
        make(jev, interrupt_on=["a"], checkpointer=InMemorySaver())
    with pytest.raises(UserError, match="pydantic model class"):
        make(jev, context_schema=dict)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="from 0 to 1"):
        make(jev, confidence_gate={"min_confidence": 1.5})
    with pytest.raises(UserError, match="unknown"):
        make(jev, confidence_gate={"minConfidence": 0.2})
    with pytest.raises(UserError, match="ConfidenceGate or a mapping"):
        make(jev, confidence_gate=0.3)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="must be a str"):
        make(jev, prompt=3)  # type: ignore[arg-type]


def test_a_missing_api_key_is_a_user_error_naming_the_variable() -> None:
    with pytest.raises(UserError, match="OPENROUTER_API_KEY"):
        JevToolCaller(tools=[JevTool("a", "A.", ok)])


def test_an_interrupt_on_key_that_matches_no_tool_warns(jev: FakeJevServer) -> None:
    with pytest.warns(UserWarning, match="'delete_customr' matches no tool"):
        make(jev, interrupt_on={"delete_customr": "Sure?"}, checkpointer=InMemorySaver())
    with pytest.warns(UserWarning, match="confidence_gate.tools key 'b'"):
        make(jev, confidence_gate={"tools": {"b": 0.9}})


def test_call_errors(jev: FakeJevServer) -> None:
    caller = make(jev, checkpointer=InMemorySaver(), context_schema=Ctx)
    with pytest.raises(UserError, match="thread_id"):
        caller.invoke({"q": "x"}, context={"tenant": "t", "api_token": "k"})
    with pytest.raises(UserError, match="not both"):
        caller.invoke({"q": "x"}, thread_id="t", decision="approve")
    with pytest.raises(UserError, match="'approve' or 'reject'"):
        caller.invoke(thread_id="t", decision="maybe")
    with pytest.raises(UserError, match="'approve' or 'reject', got \\{'type': 'edit'"):  # Agent's forms are not Jev's
        caller.invoke(thread_id="t", decision={"type": "edit", "args": {"perm": "admin"}})
    with pytest.raises(UserError, match="Nothing to do"):
        caller.invoke(thread_id="t")
    with pytest.raises(UserError, match="empty"):
        caller.invoke({}, thread_id="t")
    with pytest.raises(UserError, match="mapping of JSON fields"):
        caller.invoke("hello", thread_id="t")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="JSON-serialisable"):
        caller.invoke({"q": object()}, thread_id="t")
    with pytest.raises(UserError, match="call options, not request fields") as caught:
        caller.invoke({"q": "x", "context": {"api_token": SECRET}}, thread_id="t")
    assert SECRET not in str(caught.value)
    with pytest.raises(UserError, match="must be a str"):
        caller.invoke({"q": "x"}, thread_id=7)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="timeout"):
        caller.invoke({"q": "x"}, thread_id="t", timeout=0)
    assert jev.requests == []


def test_a_misspelt_or_missing_keyword_is_a_type_error_before_any_request(jev: FakeJevServer) -> None:
    caller = make(jev)
    with pytest.raises(TypeError, match="invoke\\(\\) got an unexpected keyword argument 'thread'"):
        caller.invoke({"q": "x"}, thread="t")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="call_tool\\(\\) missing 1 required keyword-only argument\\(s\\): 'params'"):
        caller.call_tool({"q": "x"}, tool="a")  # type: ignore[call-arg]
    assert jev.requests == []
    assert caller.invoke({"q": "x"}, debug=True).metadata is not None  # the declared keywords still arrive


def test_context_is_validated_without_echoing_it(jev: FakeJevServer) -> None:
    with pytest.raises(UserError, match="no `context_schema`"):
        make(jev).invoke({"q": "x"}, context={"api_token": SECRET})
    with pytest.raises(UserError, match="api_token: Field required") as caught:
        make(jev, context_schema=Ctx).invoke({"q": "x"}, context={"tenant": SECRET})
    assert SECRET not in str(caught.value)
    with pytest.raises(UserError, match="tenant"):
        make(jev, context_schema=Ctx).invoke({"q": "x"})


def test_a_decision_needs_a_checkpointer(jev: FakeJevServer) -> None:
    with pytest.raises(UserError, match="needs a checkpointer"):
        make(jev).invoke(decision="approve")


def test_context_reaches_callables_but_no_request_checkpoint_or_debug_output(jev: FakeJevServer) -> None:
    seen: list[str] = []

    def params(*, context: Ctx) -> dict[str, list[str]]:
        seen.append(context.api_token)
        return {"item": ["x", "y"]}

    def func(*, params: dict[str, Any], context: Ctx) -> str:
        seen.append(context.api_token)
        return "done"

    saver = InMemorySaver()
    caller = make(jev, [JevTool("t", "T.", func, params=params)], context_schema=Ctx, checkpointer=saver)
    context = Ctx(tenant="acme", api_token=SECRET)
    out = caller.invoke({"q": "y"}, thread_id="t", context=context, debug=True)
    forced = caller.call_tool({"q": "y"}, tool="t", params={"item": "y"}, thread_id="t", context=context)

    assert seen == [SECRET, SECRET, SECRET, SECRET]
    assert all(SECRET.encode() not in request.raw for request in jev.requests)
    assert SECRET not in out.model_dump_json() and SECRET not in repr(out) and SECRET not in forced.model_dump_json()
    stored = pickle.dumps((dict(saver.storage), dict(saver.writes), dict(saver.blobs)))
    assert b"done" in stored and SECRET.encode() not in stored


def test_call_tool_runs_the_tool_with_validated_candidates_and_records_history(jev: FakeJevServer) -> None:
    class Item(BaseModel):
        id: int

    items = [Item(id=1), Item(id=2)]
    got: list[Any] = []
    tool = JevTool("t", "T.", lambda params: got.append(params["item"]) or params["item"].id, params={"item": items})
    caller = make(jev, [tool, JevTool("o", "O.", ok)], checkpointer=InMemorySaver())

    out = caller.call_tool({"q": "2"}, tool="t", params={"item": items[1]}, thread_id="t")
    assert isinstance(out, JevReturn)
    assert (out.value, out.tool.name, out.tool.confidence, out.params["item"].confidence) == (2, "t", 1.0, 1.0)
    assert got[0] is items[1]
    # the JSON form (e.g. from a JevGated sent to a frontend and back) is accepted too, and maps to the object
    caller.call_tool({"q": "1"}, tool="t", params={"item": {"id": 1}}, thread_id="t")
    assert got[1] is items[0]
    assert jev.requests == []

    caller.invoke({"q": "next"}, thread_id="t")
    history = jev.requests[0].body["state"]["message_history"]
    assert history[:2] == [
        {"role": "user", "content": {"q": "2"}},
        {"role": "assistant", "content": {"tool": "t", "params": {"item": {"id": 2}}, "result": 2}},
    ]


def test_call_tool_rejects_values_outside_the_candidates_and_wrong_keys(jev: FakeJevServer) -> None:
    ran: list[int] = []
    tool = JevTool("t", "T.", lambda: ran.append(1), params={"perm": ["read", "write"]})
    caller = make(jev, [tool])
    with pytest.raises(TypeError, match="'admin' is not a candidate of parameter 'perm'"):
        caller.call_tool(None, tool="t", params={"perm": "admin"})
    with pytest.raises(TypeError, match="missing: \\['perm'\\]"):
        caller.call_tool(None, tool="t", params={})
    with pytest.raises(TypeError, match="unknown: \\['other'\\]"):
        caller.call_tool(None, tool="t", params={"perm": "read", "other": 1})
    with pytest.raises(TypeError, match="must be a mapping"):
        caller.call_tool(None, tool="t", params=["read"])  # type: ignore[arg-type]
    with pytest.raises(UserError, match="unknown tool 'x'"):
        caller.call_tool(None, tool="x", params={})
    assert ran == []
    assert caller.call_tool(None, tool="t", params={"perm": "write"}).params["perm"].value == "write"


def test_call_tool_overrides_a_gated_proposal(jev: FakeJevServer) -> None:
    jev.answer("tool", probabilities={"t": 0.55, "o": 0.45})
    tool = JevTool("t", "T.", lambda params: f"ran {params['perm']}", params={"perm": ["read", "write"]})
    caller = make(jev, [tool, JevTool("o", "O.", ok)])
    gated = caller.invoke({"q": "?"})
    assert isinstance(gated, JevGated)
    wire = json.loads(gated.model_dump_json())
    out = caller.call_tool(
        {"q": "?"}, tool=wire["tool"]["name"], params={k: v["value"] for k, v in wire["params"].items()}
    )
    assert out.value == "ran read"


async def test_acall_tool_is_the_async_twin(jev: FakeJevServer) -> None:
    async def func(params: dict[str, Any]) -> str:
        return params["perm"]

    caller = make(jev, [JevTool("t", "T.", func, params={"perm": ["read", "write"]})])
    assert (await caller.acall_tool(None, tool="t", params={"perm": "write"})).value == "write"
    with pytest.raises(UserError, match="unknown tool"):
        await caller.acall_tool(None, tool="nope", params={})


def test_errors_are_in_the_ai_utils_tree_and_pickle(jev: FakeJevServer) -> None:
    error = JevNoParamOptionsError("find", "person")
    clone = pickle.loads(pickle.dumps(error))
    assert isinstance(clone, AiUtilsError)
    assert (clone.tool_name, clone.parameter_name, clone.code, str(clone)) == (
        "find",
        "person",
        "JEV_NO_PARAM_OPTIONS",
        str(error),
    )


def test_sync_invoke_inside_an_event_loop_with_an_async_func_points_to_ainvoke(jev: FakeJevServer) -> None:
    import asyncio

    async def func() -> int:
        return 1

    caller = make(jev, [JevTool("a", "A.", func)])

    async def main() -> None:
        caller.invoke({"q": "x"})

    with pytest.warns(RuntimeWarning, match="ainvoke"), pytest.raises(UserError, match="ainvoke"):
        asyncio.run(main())
