"""runner.steer: a steer joins the running agent step before its next model call; a follow-up runs after the loop."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ai_utils import (
    LoopResult,
    LoopRunner,
    UserError,
    agent_step,
    ctx,
    define_loop,
    permission,
    sqlite_loop_runs,
    tool_step,
)
from ai_utils.testing import FunctionChatModel

ALLOW = [permission("all", resource="tool", action="call", effect="allow", match={"tool": "*"})]


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


class Steered:
    """A model that, on its first call, lets ``during_first_call`` act (as a concurrent client would)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.during_first_call: Any = None

        def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
            humans = [m.text for m in messages if isinstance(m, HumanMessage)]
            self.calls.append(humans[1:])  # without the loop context message
            if len(self.calls) == 1:
                self.during_first_call()
                return {"tool_calls": [{"name": "lookup", "args": {"query": "schema"}}]}
            if not any(isinstance(m, ToolMessage) for m in messages):
                return f"follow-up: {humans[-1]}"
            return f"answered, last note: {humans[-1]}"

        self.model = FunctionChatModel(reply)


def work_loop() -> Any:
    return define_loop(
        "work",
        start="work",
        steps={"work": agent_step(prompt="Do the work.", tools=["lookup"], next="end")},
        permissions=ALLOW,
        result={"data": ctx("work.text")},
    )


def test_a_steer_joins_the_running_agent_step_before_its_next_model_call() -> None:
    model = Steered()
    runner = LoopRunner(work_loop(), llm=model.model, tools=[lookup])
    model.during_first_call = lambda: runner.steer("t", "Use the existing database schema.")
    chunks = list(runner.stream({"request": {}}, thread_id="t"))
    assert model.calls == [[], ["Use the existing database schema."]]  # the second model call saw it
    assert {"kind": "user_message", "text": "Use the existing database schema.", "id": "1"} in chunks
    out = runner.result("t")
    assert isinstance(out, LoopResult) and out.data == "answered, last note: Use the existing database schema."
    assert out.follow_ups == ()


def test_a_follow_up_runs_after_the_loop_and_its_answer_is_returned() -> None:
    model = Steered()
    runner = LoopRunner(work_loop(), llm=model.model, tools=[lookup])
    model.during_first_call = lambda: runner.steer("f", "Then summarise it for me.", follow_up=True)
    out = runner.invoke({"request": {}}, thread_id="f")
    assert isinstance(out, LoopResult)
    assert model.calls == [[], [], ["Then summarise it for me."]]  # not during the step: after it
    assert out.data == 'answered, last note: Loop context (JSON):\n{"request": {}}'
    assert out.follow_ups == ({"text": "follow-up: Then summarise it for me."},)
    assert runner.state("f") == "completed"


def test_a_steer_to_a_finished_run_is_refused() -> None:
    model = Steered()
    runner = LoopRunner(work_loop(), llm=model.model, tools=[lookup])
    model.during_first_call = lambda: None
    runner.invoke({"request": {}}, thread_id="done")
    with pytest.raises(UserError, match=r"has finished \(completed\).*Start a new run"):
        runner.steer("done", "too late")
    with pytest.raises(UserError, match="no run"):
        runner.steer("never-started", "hello")
    with pytest.raises(UserError, match="non-empty str"):
        runner.steer("done", "")
    only_tools = define_loop(
        "tools", start="a", steps={"a": tool_step("lookup", input={"query": "x"}, next="end")}, permissions=ALLOW
    )
    with pytest.raises(UserError, match="no agent step"):
        LoopRunner(only_tools, tools=[lookup]).steer("x", "hi")


def test_a_steer_from_another_runner_on_a_shared_store_reaches_the_run(tmp_path: Path) -> None:
    model = Steered()
    with sqlite_loop_runs(tmp_path / "runs.db") as store:
        runner = LoopRunner(work_loop(), llm=model.model, tools=[lookup], run_store=store)
        elsewhere = LoopRunner(work_loop(), llm=model.model, tools=[lookup], run_store=store)
        model.during_first_call = lambda: elsewhere.steer("s", "Prefer the EU region.")
        out = runner.invoke({"request": {}}, thread_id="s")
    assert isinstance(out, LoopResult) and out.data == "answered, last note: Prefer the EU region."


async def test_a_steer_no_agent_step_took_is_answered_as_a_follow_up_never_lost() -> None:
    model = Steered()
    model.during_first_call = lambda: None
    runner: LoopRunner

    @tool
    def notify(channel: str) -> str:
        """Notify a channel."""
        runner.steer("late", "One more thing: cc the manager.")  # after the agent step's last model call
        return f"notified {channel}"

    loop = define_loop(
        "late",
        start="work",
        steps={
            "work": agent_step(prompt="Do the work.", tools=["lookup"], next="notify"),
            "notify": tool_step("notify", input={"channel": "ops"}, next="end"),
        },
        permissions=ALLOW,
    )
    runner = LoopRunner(loop, llm=model.model, tools=[lookup, notify])
    out = await runner.ainvoke({"request": {}}, thread_id="late")
    assert isinstance(out, LoopResult)
    assert out.follow_ups == ({"text": "follow-up: One more thing: cc the manager."},)
    with pytest.raises(UserError, match="finished"):
        await runner.asteer("late", "after the end")


class Watching(AgentMiddleware[AgentState[Any], Any, Any]):
    """User middleware with a model-call hook: records the user messages each call carries; may block the second."""

    def __init__(self, *, block: bool) -> None:
        super().__init__()
        self.seen: list[list[str]] = []
        self.block = block

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        self.seen.append([m.text for m in request.messages if isinstance(m, HumanMessage)][1:])
        if self.block and len(self.seen) == 2:
            return ModelResponse(result=[AIMessage("Blocked by policy.")])
        return handler(request)


@pytest.mark.parametrize("block", [False, True])
def test_a_steer_passes_the_users_model_call_middleware_and_is_kept_when_it_blocks(block: bool) -> None:
    model = Steered()
    watching = Watching(block=block)
    runner = LoopRunner(work_loop(), llm=model.model, tools=[lookup], middleware=[watching])
    model.during_first_call = lambda: runner.steer(f"w{block}", "Use the existing database schema.")
    out = runner.invoke({"request": {}}, thread_id=f"w{block}")
    assert watching.seen == [[], ["Use the existing database schema."]]  # the user's hook saw the steer join
    assert isinstance(out, LoopResult)
    # Blocked or not, the steer is stored in the step (taken), so it is never answered again as a follow-up.
    assert out.follow_ups == ()
    assert out.data == ("Blocked by policy." if block else "answered, last note: Use the existing database schema.")
