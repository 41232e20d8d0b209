"""CLI models call tools through the prompt: stand-in `claude`/`codex` executables drive real agents."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends import FilesystemBackend
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ai_utils import Agent, DeepAgent, ModelOutputError, get_llm
from ai_utils.client import is_tool_event

_SCRIPT = """#!{python}
import json, sys
from pathlib import Path
stdin = sys.stdin.read()
record = Path({record!r})
calls = record.read_text().count("\\n") if record.exists() else 0
with record.open("a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "stdin": stdin}}) + "\\n")
replies = {replies!r}
text = replies[min(calls, len(replies) - 1)]
if {kind!r} == "claude":
    result = {{"type": "result", "subtype": "success", "is_error": False, "result": text,
              "usage": {{"input_tokens": 3, "output_tokens": 2}}}}
    if "stream-json" in sys.argv:
        for i in range(0, len(text), 5):
            delta = {{"type": "text_delta", "text": text[i:i + 5]}}
            print(json.dumps({{"type": "stream_event",
                              "event": {{"type": "content_block_delta", "index": 0, "delta": delta}}}}))
    print(json.dumps(result))
else:
    print(json.dumps({{"type": "item.completed", "item": {{"id": "i", "type": "agent_message", "text": text}}}}))
    print(json.dumps({{"type": "turn.completed", "usage": {{"input_tokens": 3, "output_tokens": 2}}}}))
"""


@dataclass
class ScriptedCLI:
    """A stand-in CLI that answers its n-th call with the n-th scripted reply and records each call."""

    record: Path

    def calls(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()] if self.record.exists() else []

    def system(self, index: int) -> str:
        """The system prompt of a claude call (``--system-prompt``), or a codex call's ``<system>`` block."""
        call = self.calls()[index]
        argv = call["argv"]
        return str(argv[argv.index("--system-prompt") + 1]) if "--system-prompt" in argv else str(call["stdin"])


@pytest.fixture
def scripted_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., ScriptedCLI]:
    def make(kind: str, replies: list[str]) -> ScriptedCLI:
        record = tmp_path / f"{kind}.calls.jsonl"
        record.unlink(missing_ok=True)  # a new script starts counting its calls at 0
        path = tmp_path / kind
        path.write_text(_SCRIPT.format(python=sys.executable, record=str(record), replies=replies, kind=kind))
        path.chmod(0o755)
        monkeypatch.setenv(f"AI_UTILS_{kind.upper()}_CLI", str(path))
        return ScriptedCLI(record)

    return make


def write_call(path: str, content: str) -> str:
    return json.dumps({"tool": "write_file", "arguments": {"file_path": path, "content": content}})


def test_a_deep_agent_on_claude_cli_writes_a_file_through_a_tool_call(
    scripted_cli: Callable[..., ScriptedCLI], tmp_path: Path
) -> None:
    cli = scripted_cli("claude", [write_call("/notes.txt", "Hallo Welt"), "Fertig: notes.txt steht."])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agent = DeepAgent(llm=get_llm("claude-cli"), backend=FilesystemBackend(root_dir=workspace, virtual_mode=True))

    assert agent.invoke("Schreib Hallo Welt in notes.txt", thread_id="t") == "Fertig: notes.txt steht."
    assert (workspace / "notes.txt").read_text() == "Hallo Welt"

    first, second = cli.calls()
    system = cli.system(0)
    assert "## Tools" in system and '{"tool": "<tool name>", "arguments"' in system
    assert "- write_file:" in system and '"file_path"' in system  # the tool's JSON schema
    assert "Tool result (write_file)" in second["stdin"] and '"tool": "write_file"' in second["stdin"]
    messages = agent.get_state("t").values["messages"]
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [(c["name"], c["args"]["file_path"]) for c in calls] == [("write_file", "/notes.txt")]
    assert [m.tool_call_id for m in messages if isinstance(m, ToolMessage)] == [calls[0]["id"]]


def test_streaming_a_deep_agent_on_claude_cli_shows_the_call_and_never_its_json(
    scripted_cli: Callable[..., ScriptedCLI], tmp_path: Path
) -> None:
    scripted_cli("claude", [write_call("/a.txt", "A"), "Die Datei ist geschrieben."])
    agent = DeepAgent(llm=get_llm("claude-cli"), backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True))

    chunks = list(agent.stream("Schreib a.txt", thread_id="t", show_tool_calls=True))

    tools = [(c["phase"], c["tool_name"]) for c in chunks if is_tool_event(c)]
    assert tools == [("start", "write_file"), ("end", "write_file")]
    text = "".join(c for c in chunks if isinstance(c, str))
    assert text == "Die Datei ist geschrieben." and "{" not in text
    assert (tmp_path / "a.txt").read_text() == "A"


def test_an_agent_on_codex_cli_calls_a_tool_given_in_a_code_fence(scripted_cli: Callable[..., ScriptedCLI]) -> None:
    looked_up: list[str] = []

    def lookup(term: str, limit: int = 3) -> str:
        """Look a term up in the knowledge base."""
        looked_up.append(term)
        return f"{term}: 42"

    fenced = '```json\n{"tool": "lookup", "arguments": {"term": "Antwort"}}\n```'
    cli = scripted_cli("codex", [fenced, "Die Antwort ist 42."])
    agent = Agent(llm=get_llm("codex-cli"), tools=[lookup])

    assert agent.invoke("Was ist die Antwort?") == "Die Antwort ist 42."
    assert looked_up == ["Antwort"]
    first = cli.calls()[0]["stdin"]
    assert first.startswith("<system>") and "- lookup: Look a term up" in first and '"limit"' in first


def lookup_tool(seen: list[str]) -> Any:
    def lookup(term: str) -> str:
        """Look a term up."""
        seen.append(term)
        return "found"

    return lookup


@pytest.mark.parametrize(
    ("bad", "told"),
    [
        ('{"tool": "lookup", "arguments": {"term": }', "not valid JSON"),
        ('{"tool": "lookup", "arguments": {}}', "arguments.term is missing"),
        ('{"tool": "lookup", "arguments": {"term": 7}}', "arguments.term must be string"),
        ('{"tool": "search", "arguments": {"term": "x"}}', "There is no tool 'search'"),
    ],
)
def test_a_bad_tool_call_is_repaired_once(scripted_cli: Callable[..., ScriptedCLI], bad: str, told: str) -> None:
    seen: list[str] = []
    good = '{"tool": "lookup", "arguments": {"term": "x"}}'
    cli = scripted_cli("claude", [bad, good, "Gefunden."])
    agent = Agent(llm=get_llm("claude-cli"), tools=[lookup_tool(seen)])

    assert agent.invoke("Such x") == "Gefunden."
    assert seen == ["x"]
    repair = cli.calls()[1]["stdin"]
    assert "Your last reply was not a valid tool call" in repair and told in repair
    assert len(cli.calls()) == 3


def test_a_second_bad_tool_call_is_a_clear_error(scripted_cli: Callable[..., ScriptedCLI]) -> None:
    scripted_cli("claude", ['{"tool": "lookup", "arguments": {"term": ', '{"tool": "lookup"'])
    agent = Agent(llm=get_llm("claude-cli"), tools=[lookup_tool([])])

    with pytest.raises(ModelOutputError, match="no valid tool call, also after one repair") as info:
        agent.invoke("Such x")
    assert info.value.attempts == 2 and info.value.output == '{"tool": "lookup"'


def test_the_stream_path_repairs_too(scripted_cli: Callable[..., ScriptedCLI]) -> None:
    seen: list[str] = []
    scripted_cli("claude", ["{oops", '{"tool": "lookup", "arguments": {"term": "y"}}', "Gefunden: y."])
    agent = Agent(llm=get_llm("claude-cli"), tools=[lookup_tool(seen)])
    chunks = list(agent.stream("Such y", show_tool_calls=True))
    assert seen == ["y"] and "".join(c for c in chunks if isinstance(c, str)) == "Gefunden: y."


async def test_the_async_paths_call_tools_as_well(scripted_cli: Callable[..., ScriptedCLI]) -> None:
    seen: list[str] = []
    scripted_cli("claude", ["{bad", '{"tool": "lookup", "arguments": {"term": "z"}}', "Gefunden: z."])
    agent = Agent(llm=get_llm("claude-cli"), tools=[lookup_tool(seen)])
    assert await agent.ainvoke("Such z") == "Gefunden: z."
    scripted_cli("claude", ['{"tool": "lookup", "arguments": {"term": "w"}}', "Gefunden: w."])
    chunks = [c async for c in agent.astream("Such w")]
    assert seen == ["z", "w"] and "".join(c for c in chunks if isinstance(c, str)) == "Gefunden: w."


def test_tool_choice_and_plain_answers(scripted_cli: Callable[..., ScriptedCLI]) -> None:
    cli = scripted_cli("claude", ['{"answer": 42}', "Hallo.", '{"tool": "lookup", "arguments": {"term": "q"}}'])
    llm = get_llm("claude-cli")
    bound = llm.bind_tools([lookup_tool([])])
    assert bound.invoke([HumanMessage("JSON bitte")]).content == '{"answer": 42}'  # JSON without "tool": an answer
    assert llm.bind_tools([lookup_tool([])], tool_choice="none").invoke("hi").content == "Hallo."
    assert "## Tools" not in cli.system(1)
    forced = llm.bind_tools([lookup_tool([])], tool_choice="lookup").invoke("hi")
    assert forced.tool_calls[0]["name"] == "lookup" and forced.tool_calls[0]["args"] == {"term": "q"}
    assert "You must call the tool `lookup` now." in cli.system(2)
    assert llm.bind_tools([]) is llm
