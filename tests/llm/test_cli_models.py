from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage
from pydantic import BaseModel

from ai_utils.exceptions import ProviderError, UserError
from ai_utils.llm import ChatClaudeCLI, ChatCodexCLI, get_llm
from ai_utils.llm._cli_prompt import render_prompt

FakeCLI = Any  # tests/llm/conftest.py::FakeCLI
MakeCLI = Callable[..., Any]


def _lines(*events: dict[str, object]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


CLAUDE_RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "duration_ms": 2100,
    "num_turns": 1,
    "result": "Paris.",
    "session_id": "6f1c2d",
    "total_cost_usd": 0.0123,
    "usage": {
        "input_tokens": 4,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 900,
        "output_tokens": 5,
        "service_tier": "standard",
    },
    "permission_denials": [],
}


def _delta(kind: str, key: str, text: str, index: int) -> dict[str, object]:
    return {
        "type": "stream_event",
        "event": {"type": "content_block_delta", "index": index, "delta": {"type": kind, key: text}},
        "session_id": "6f1c2d",
        "parent_tool_use_id": None,
    }


CLAUDE_STREAM = _lines(
    {"type": "system", "subtype": "init", "session_id": "6f1c2d", "tools": [], "model": "claude-sonnet-4-6"},
    {"type": "stream_event", "event": {"type": "message_start", "message": {"id": "msg_1", "content": []}}},
    _delta("thinking_delta", "thinking", "The user asks ", 0),
    _delta("thinking_delta", "thinking", "for a capital.", 0),
    _delta("text_delta", "text", "Par", 1),
    _delta("text_delta", "text", "is.", 1),
    {
        "type": "assistant",
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "The user asks for a capital.", "signature": "sig"},
                {"type": "text", "text": "Paris."},
            ],
        },
    },
    CLAUDE_RESULT,
)

CODEX_EVENTS = _lines(
    {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "**Recalling geography**"}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "Let me answer."}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "Paris."}},
    {"type": "turn.completed", "usage": {"input_tokens": 2400, "cached_input_tokens": 1024, "output_tokens": 12}},
)


@pytest.fixture
def claude(fake_cli: MakeCLI, monkeypatch: pytest.MonkeyPatch) -> FakeCLI:
    cli = fake_cli("claude", stdout=json.dumps(CLAUDE_RESULT), stream_stdout=CLAUDE_STREAM)
    monkeypatch.setenv("AI_UTILS_CLAUDE_CLI", str(cli.path))
    return cli


@pytest.fixture
def codex(fake_cli: MakeCLI, monkeypatch: pytest.MonkeyPatch) -> FakeCLI:
    cli = fake_cli("codex", stdout=CODEX_EVENTS)
    monkeypatch.setenv("AI_UTILS_CODEX_CLI", str(cli.path))
    return cli


def test_claude_cli_invoke_runs_print_mode_with_model_effort_and_system_prompt(claude: FakeCLI) -> None:
    llm = get_llm("claude-cli", "opus", reasoning="high", temperature=0.3)

    reply = llm.invoke([SystemMessage("Answer in one word."), HumanMessage("Capital of France?")])

    assert isinstance(llm, ChatClaudeCLI)
    assert reply.content == "Paris."
    assert claude.argv == [
        "-p",
        "--output-format",
        "json",
        "--model",
        "opus",
        "--tools",
        "",
        "--no-session-persistence",
        "--system-prompt",
        "Answer in one word.",
        "--effort",
        "high",
    ]
    assert claude.stdin == "Capital of France?"
    assert reply.usage_metadata == {
        "input_tokens": 1004,
        "output_tokens": 5,
        "total_tokens": 1009,
        "input_token_details": {"cache_read": 900, "cache_creation": 100},
    }
    assert reply.response_metadata["total_cost_usd"] == 0.0123
    assert reply.response_metadata["model_name"] == "opus"


def test_claude_cli_defaults_to_sonnet_and_maps_minimal_effort_to_low(claude: FakeCLI) -> None:
    get_llm("claude-cli", reasoning="minimal").invoke("hi")

    argv = claude.argv
    assert argv[argv.index("--model") + 1] == "sonnet"
    assert argv[argv.index("--effort") + 1] == "low"
    assert "--system-prompt" not in argv


def test_claude_cli_streams_thinking_separately_from_text(claude: FakeCLI) -> None:
    llm = get_llm("claude-cli")

    chunks = list(llm.stream("Capital of France?"))

    assert claude.argv[:6] == [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--model",
    ]
    texts = [c.content for c in chunks if c.content]
    assert texts == ["Par", "is."]
    reasoning = [b["reasoning"] for c in chunks for b in c.content_blocks if b["type"] == "reasoning"]
    assert reasoning == ["The user asks ", "for a capital."]
    full = sum(chunks[1:], chunks[0])
    assert isinstance(full, AIMessageChunk)
    assert full.content == "Paris."
    assert full.content_blocks[0] == {"type": "reasoning", "reasoning": "The user asks for a capital."}
    assert full.usage_metadata is not None and full.usage_metadata["output_tokens"] == 5


def test_claude_cli_without_partial_messages_streams_whole_assistant_messages(fake_cli: MakeCLI) -> None:
    events = [json.loads(line) for line in CLAUDE_STREAM.splitlines()]
    without_deltas = _lines(*(e for e in events if e["type"] != "stream_event"))
    cli = fake_cli("claude-old", stdout="", stream_stdout=without_deltas)
    llm = ChatClaudeCLI(model="sonnet", executable=str(cli.path))

    full = None
    for chunk in llm.stream("Capital of France?"):
        full = chunk if full is None else full + chunk

    assert full is not None
    assert full.content == "Paris."
    assert full.additional_kwargs["reasoning_content"] == "The user asks for a capital."


def test_claude_cli_uses_the_result_text_when_the_stream_had_no_text(fake_cli: MakeCLI) -> None:
    cli = fake_cli("claude", stdout="", stream_stdout=_lines(CLAUDE_RESULT))
    llm = ChatClaudeCLI(model="sonnet", executable=str(cli.path))

    assert "".join(str(c.content) for c in llm.stream("hi")) == "Paris."


def test_claude_cli_verbose_json_list_output_is_understood(fake_cli: MakeCLI) -> None:
    events = [{"type": "system", "subtype": "init"}, CLAUDE_RESULT]
    cli = fake_cli("claude", stdout=json.dumps(events))

    assert ChatClaudeCLI(model="sonnet", executable=str(cli.path)).invoke("hi").content == "Paris."


def test_claude_cli_reported_error_becomes_provider_error(fake_cli: MakeCLI) -> None:
    failed = {**CLAUDE_RESULT, "subtype": "success", "is_error": True, "result": "Invalid API key · Please run /login"}
    cli = fake_cli("claude", stdout=json.dumps(failed), exit_code=1)
    llm = ChatClaudeCLI(model="sonnet", executable=str(cli.path))

    with pytest.raises(ProviderError) as info:
        llm.invoke("hi")

    assert info.value.provider == "claude-cli"
    assert "Please run /login" in str(info.value)
    assert "exited with code 1" in str(info.value)


def test_claude_cli_error_result_with_exit_zero_is_a_provider_error(fake_cli: MakeCLI) -> None:
    failed = {**CLAUDE_RESULT, "subtype": "error_during_execution", "is_error": True, "result": "model not found"}
    cli = fake_cli("claude", stdout=json.dumps(failed), stream_stdout=_lines(failed))
    llm = ChatClaudeCLI(model="nope", executable=str(cli.path))

    with pytest.raises(ProviderError, match="error_during_execution.*model not found"):
        llm.invoke("hi")
    with pytest.raises(ProviderError, match="model not found"):
        list(llm.stream("hi"))


def test_claude_cli_garbage_output_is_a_provider_error(fake_cli: MakeCLI) -> None:
    cli = fake_cli("claude", stdout="Welcome to Claude Code!\n", stream_stdout="not json\n")
    llm = ChatClaudeCLI(model="sonnet", executable=str(cli.path))

    with pytest.raises(ProviderError, match="printed no JSON: Welcome to Claude Code"):
        llm.invoke("hi")
    with pytest.raises(ProviderError, match="printed no result object"):
        list(llm.stream("hi"))


def test_nonzero_exit_is_a_provider_error_with_the_stderr_excerpt(fake_cli: MakeCLI) -> None:
    cli = fake_cli("codex", stdout="", stderr="Error: not logged in. Run `codex login`.", exit_code=2)
    llm = ChatCodexCLI(model="gpt-5.5", executable=str(cli.path))

    with pytest.raises(ProviderError, match=r"exited with code 2: Error: not logged in") as info:
        llm.invoke("hi")
    assert info.value.provider == "codex-cli"
    with pytest.raises(ProviderError, match="not logged in"):
        list(llm.stream("hi"))


async def test_nonzero_exit_is_a_provider_error_in_async_calls_too(fake_cli: MakeCLI) -> None:
    cli = fake_cli("codex", stdout="", stderr="boom", exit_code=3)
    llm = ChatCodexCLI(model="gpt-5.5", executable=str(cli.path))

    with pytest.raises(ProviderError, match="exited with code 3: boom"):
        await llm.ainvoke("hi")
    with pytest.raises(ProviderError, match="exited with code 3: boom"):
        async for _ in llm.astream("hi"):
            pass


def test_codex_cli_invoke_runs_exec_json_read_only_with_effort(codex: FakeCLI) -> None:
    llm = get_llm("codex-cli", reasoning="low", temperature=0.9)

    reply = llm.invoke([SystemMessage("Be terse."), HumanMessage("Capital of France?")])

    assert isinstance(llm, ChatCodexCLI)
    assert codex.argv == [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
        "read-only",
        "-m",
        "gpt-5.5",
        "-c",
        'model_reasoning_effort="low"',
        "-",
    ]
    assert codex.stdin == "<system>\nBe terse.\n</system>\n\nCapital of France?"
    assert reply.content == "Paris."
    assert reply.additional_kwargs["reasoning_content"] == "**Recalling geography**\n\nLet me answer."
    assert reply.usage_metadata == {
        "input_tokens": 2400,
        "output_tokens": 12,
        "total_tokens": 2412,
        "input_token_details": {"cache_read": 1024},
    }


def test_codex_cli_streams_reasoning_first_and_the_final_agent_message_as_text(codex: FakeCLI) -> None:
    chunks = list(get_llm("codex-cli", "gpt-5.5-mini").stream("Capital of France?"))

    assert "-c" not in codex.argv
    assert codex.argv[codex.argv.index("-m") + 1] == "gpt-5.5-mini"
    assert [c.content for c in chunks if c.content] == ["Paris."]
    first_text = next(i for i, c in enumerate(chunks) if c.content)
    assert all(b["type"] == "reasoning" for c in chunks[:first_text] for b in c.content_blocks)


def test_codex_cli_turn_failure_is_a_provider_error(fake_cli: MakeCLI) -> None:
    out = _lines(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "error", "message": "Reconnecting... 1/5"},
        {"type": "turn.failed", "error": {"message": "model 'nope' does not exist"}},
    )
    cli = fake_cli("codex", stdout=out)

    with pytest.raises(ProviderError, match="turn failed: model 'nope' does not exist"):
        ChatCodexCLI(model="nope", executable=str(cli.path)).invoke("hi")


def test_codex_cli_without_agent_message_reports_the_last_error(fake_cli: MakeCLI) -> None:
    out = "not json\n" + _lines({"type": "error", "message": "stream disconnected"}, [1, 2])  # type: ignore[arg-type]
    cli = fake_cli("codex", stdout=out)

    with pytest.raises(ProviderError, match="gave no answer: stream disconnected"):
        ChatCodexCLI(model="gpt-5.5", executable=str(cli.path)).invoke("hi")


def test_conversation_history_is_rendered_as_a_transcript(codex: FakeCLI) -> None:
    history = [
        HumanMessage("What is 2+2?"),
        AIMessage("4"),
        ToolMessage("sunny", tool_call_id="call_1", name="weather"),
        HumanMessage("And times 3?"),
    ]
    get_llm("codex-cli").invoke(history)

    assert codex.stdin == (
        "<conversation>\nUser: What is 2+2?\n\nAssistant: 4\n\nTool result (weather): sunny\n\n"
        "User: And times 3?\n</conversation>\n\n"
        "Reply as the Assistant to the last User message of the conversation above."
    )


def test_render_prompt_keeps_a_single_user_message_verbatim() -> None:
    assert render_prompt([HumanMessage("hi")]) == (None, "hi")
    system, prompt = render_prompt([SystemMessage("a"), SystemMessage("b"), AIMessage("x")])
    assert system == "a\n\nb"
    assert "Assistant: x" in prompt


def test_missing_executable_fails_at_get_llm_time_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AI_UTILS_CLAUDE_CLI", "/nowhere/claude-missing")
    with pytest.raises(UserError, match=r"'/nowhere/claude-missing' was not found.*AI_UTILS_CLAUDE_CLI"):
        get_llm("claude-cli")
    monkeypatch.setenv("PATH", "/nonexistent-dir")
    with pytest.raises(UserError, match=r"codex-cli executable 'codex' was not found.*AI_UTILS_CODEX_CLI"):
        get_llm("codex-cli")


def test_missing_executable_at_call_time_is_a_user_error() -> None:
    llm = ChatCodexCLI(model="gpt-5.5", executable="/nowhere/codex")

    with pytest.raises(UserError, match="'/nowhere/codex' was not found"):
        llm.invoke("hi")


def test_cli_found_on_path_is_used(fake_cli: MakeCLI, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = fake_cli("claude", stdout=json.dumps(CLAUDE_RESULT))
    monkeypatch.setenv("PATH", str(cli.path.parent))

    assert get_llm("claude-cli").invoke("hi").content == "Paris."
    assert cli.calls()


class City(BaseModel):
    name: str
    country: str


def test_structured_output_asks_for_json_and_parses_it(fake_cli: MakeCLI) -> None:
    reply = {**CLAUDE_RESULT, "result": '```json\n{"name": "Paris", "country": "France"}\n```'}
    cli = fake_cli("claude", stdout=json.dumps(reply))
    llm = ChatClaudeCLI(model="sonnet", executable=str(cli.path))

    city = llm.with_structured_output(City).invoke("Capital of France?")

    assert city == City(name="Paris", country="France")
    system = cli.argv[cli.argv.index("--system-prompt") + 1]
    assert system.startswith("Answer with one JSON value that matches this JSON schema")
    assert '"country"' in system


def test_structured_output_with_a_dict_schema_and_include_raw(fake_cli: MakeCLI) -> None:
    cli = fake_cli("codex", stdout=CODEX_EVENTS)
    llm = ChatCodexCLI(model="gpt-5.5", executable=str(cli.path))
    schema = {"title": "city", "type": "object", "properties": {"name": {"type": "string"}}}

    out = llm.with_structured_output(schema, include_raw=True, method="json_schema").invoke("hi")

    assert out["parsed"] is None  # "Paris." is not JSON
    assert out["parsing_error"] is not None
    assert out["raw"].content == "Paris."
    assert cli.stdin.startswith("<system>\nAnswer with one JSON value")


def test_timeout_kills_the_process(fake_cli: MakeCLI) -> None:
    cli = fake_cli("claude", stdout=json.dumps(CLAUDE_RESULT), sleep=30)
    llm = ChatClaudeCLI(model="sonnet", executable=str(cli.path), timeout=0.5)

    started = time.monotonic()
    with pytest.raises(ProviderError, match="timeout=0.5s"):
        llm.invoke("hi")
    with pytest.raises(ProviderError, match="timeout=0.5s"):
        list(llm.stream("hi"))
    assert time.monotonic() - started < 10


async def test_async_timeout_kills_the_process(fake_cli: MakeCLI) -> None:
    cli = fake_cli("claude", stdout=json.dumps(CLAUDE_RESULT), sleep=30)
    llm = ChatClaudeCLI(model="sonnet", executable=str(cli.path), timeout=0.5)

    with pytest.raises(ProviderError, match="timeout=0.5s"):
        await llm.ainvoke("hi")
    with pytest.raises(ProviderError, match="timeout=0.5s"):
        async for _ in llm.astream("hi"):
            pass


async def test_async_invoke_and_stream_parse_like_the_sync_ones(claude: FakeCLI) -> None:
    llm = get_llm("claude-cli")

    reply = await llm.ainvoke("hi")
    chunks = [c async for c in llm.astream("hi")]

    assert reply.content == "Paris."
    assert "".join(str(c.content) for c in chunks) == "Paris."
    assert any(b["type"] == "reasoning" for c in chunks for b in c.content_blocks)


async def test_cancelling_an_async_call_kills_the_cli_process(fake_cli: MakeCLI, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    cli = fake_cli("codex", stdout="", sleep=30)
    script = cli.path.read_text().replace(
        "data = sys.stdin.read()",
        f"import os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ndata = sys.stdin.read()",
    )
    cli.path.write_text(script)
    llm = ChatCodexCLI(model="gpt-5.5", executable=str(cli.path))

    task = asyncio.ensure_future(llm.ainvoke("hi"))
    for _ in range(200):
        if cli.calls():
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)


def test_stream_yields_chunks_while_the_cli_is_still_running(fake_cli: MakeCLI) -> None:
    cli = fake_cli("claude", stdout="", stream_stdout=CLAUDE_STREAM, sleep=1.5)
    llm = ChatClaudeCLI(model="sonnet", executable=str(cli.path))

    started = time.monotonic()
    stream = llm.stream("hi")
    first = next(stream)
    first_after = time.monotonic() - started
    rest = list(stream)

    assert first_after < 1.2
    assert time.monotonic() - started >= 1.5
    assert "".join(str(c.content) for c in [first, *rest]) == "Paris."


async def test_astream_yields_chunks_while_the_cli_is_still_running(fake_cli: MakeCLI) -> None:
    cli = fake_cli("claude", stdout="", stream_stdout=CLAUDE_STREAM, sleep=1.5)
    llm = ChatClaudeCLI(model="sonnet", executable=str(cli.path))

    started = time.monotonic()
    stream = llm.astream("hi")
    first = await anext(stream)
    first_after = time.monotonic() - started
    rest = [c async for c in stream]

    assert first_after < 1.2
    assert "".join(str(c.content) for c in [first, *rest]) == "Paris."
