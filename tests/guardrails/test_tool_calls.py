"""Tool-call policies through `Agent`: private-network blocks, schema checks, destructive approval, limits, faults."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool, tool

from ai_utils import Agent, MemorySaver, guardrails
from ai_utils.client import is_interrupt
from ai_utils.testing import FakeChatModel

PRIVATE_URLS = [
    "http://127.0.0.1/admin",
    "http://2130706433/",  # decimal 127.0.0.1
    "http://0x7f000001/",  # hex
    "http://0x7f.0.0.1/",
    "http://0177.0.0.1/",  # octal
    "http://127.1/",  # shorthand
    "http://10.0.0.8:8080/internal",
    "http://172.16.4.2/",
    "http://192.168.1.1/router",
    "http://100.64.0.1/",  # shared address space
    "http://169.254.169.254/latest/meta-data/iam",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://[::1]:9000/",
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped IPv6
    "http://[::ffff:a00:1]/",  # mapped 10.0.0.1 in hex groups
    "http://[fe80::1%25eth0]/",  # link-local with zone id
    "http://[fd00:ec2::254]/",  # AWS IPv6 metadata
    "http://localhost:3000/",
    "http://LOCALHOST./",
    "http://api.localhost/",
    "http://printer.local/",
    "http://%6c%6fcalhost/",  # percent-encoded host
    "http://ｌｏｃａｌｈｏｓｔ/",  # full-width letters
    "http://0.0.0.0/",
    "http://user:pw@10.1.2.3/",
    "http://127.0.0.1\\@example.com/",  # backslash trick
]


class Counter:
    def __init__(self) -> None:
        self.calls: list[Any] = []


@pytest.fixture
def fetched() -> Counter:
    return Counter()


def _fetch_tool(counter: Counter) -> StructuredTool:
    def fetch_url(url: str) -> str:
        """Fetch a web page."""
        counter.calls.append(url)
        return "<html>ok</html>"

    return StructuredTool.from_function(fetch_url)


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def _last_tool_message(model: FakeChatModel) -> ToolMessage:
    return next(m for m in reversed(model.calls[-1]) if isinstance(m, ToolMessage))


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_private_network_destination_is_blocked_and_the_tool_never_runs(url: str, fetched: Counter) -> None:
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([_call("fetch_url", url=url), "I cannot reach that address."])
    agent = Agent(llm=model, tools=[_fetch_tool(fetched)], middleware=guardrails(on_decision=decisions.append))

    assert agent.invoke("fetch it") == "I cannot reach that address."

    assert fetched.calls == []
    result = _last_tool_message(model)
    assert result.status == "error" and "private-network destination" in result.text
    assert decisions == [
        {"policy_id": "network.private", "phase": "tool_input", "action": "block", "risk": "high", "tool": "fetch_url"}
    ]


@pytest.mark.parametrize(
    "args",
    [
        {"host": "2130706433"},
        {"host": "0x7f.1"},
        {"target": {"address": "10.0.0.1"}},
        {"hosts": ["example.com", "192.168.0.10"]},
        {"command": "curl -s http://169.254.169.254/latest/"},
        {"command": "ssh root@10.2.3.4"},
        {"host": "::1"},
    ],
)
def test_private_destinations_anywhere_in_the_arguments_are_blocked(args: dict[str, Any]) -> None:
    ran: list[Any] = []

    def connect(**kwargs: Any) -> str:
        ran.append(kwargs)
        return "connected"

    tool_ = StructuredTool.from_function(
        connect,
        name="connect",
        description="Connect somewhere.",
        args_schema={"type": "object", "properties": {k: {} for k in args}},
    )
    model = FakeChatModel([_call("connect", **args), "blocked"])
    Agent(llm=model, tools=[tool_], middleware=guardrails()).invoke("go")
    assert ran == [] and "private-network" in _last_tool_message(model).text


def test_public_destinations_and_prose_numbers_pass(fetched: Counter) -> None:
    model = FakeChatModel(
        [
            _call("fetch_url", url="https://example.com/docs?v=10.5&n=42"),
            _call("fetch_url", url="https://8.8.8.8/"),
            "done",
        ]
    )
    Agent(llm=model, tools=[_fetch_tool(fetched)], middleware=guardrails()).invoke("read the docs")
    assert fetched.calls == ["https://example.com/docs?v=10.5&n=42", "https://8.8.8.8/"]


def test_invalid_arguments_get_an_error_result_and_the_tool_does_not_run() -> None:
    ran: list[int] = []

    @tool
    def refund(order_id: int, amount: float) -> str:
        """Refund an order."""
        ran.append(order_id)
        return "refunded"

    model = FakeChatModel([_call("refund", order_id="not-a-number"), _call("refund", order_id=7, amount=9.5), "ok"])
    Agent(llm=model, tools=[refund], middleware=guardrails()).invoke("refund order 7")

    first = next(m for m in model.calls[1] if isinstance(m, ToolMessage))
    assert first.status == "error" and "tool.schema" in first.text
    assert "order_id" in first.text and "amount" in first.text and "not-a-number" not in first.text
    assert ran == [7]  # the corrected call ran, once


def _delete_tool(deleted: list[str]) -> StructuredTool:
    def delete_user(user_id: str) -> str:
        """Delete a user account."""
        deleted.append(user_id)
        return f"deleted {user_id}"

    return StructuredTool.from_function(delete_user)


def test_destructive_tool_waits_for_approval_and_runs_once_when_approved() -> None:
    deleted: list[str] = []
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([_call("delete_user", user_id="u-42"), "User u-42 is gone."])
    agent = Agent(
        llm=model,
        tools=[_delete_tool(deleted)],
        checkpointer=MemorySaver(),
        middleware=guardrails("standard", on_decision=decisions.append),
    )

    chunks = list(agent.stream("delete u-42", thread_id="t"))
    pending = chunks[-1]
    assert is_interrupt(pending) and "items" not in pending
    assert pending["tool_name"] == "delete_user" and pending["args"] == {"user_id": "u-42"}
    assert pending["decisions"] == ["approve", "edit", "reject"]
    assert deleted == [] and agent.pending("t") == pending  # still waiting, e.g. after a page reload

    assert agent.invoke(decision="approve", thread_id="t") == "User u-42 is gone."
    assert deleted == ["u-42"]
    assert agent.pending("t") is None
    agent_tail = [d["action"] for d in decisions]
    assert agent_tail == ["require_approval", "approved"]


async def test_destructive_tool_rejected_never_runs_async() -> None:
    deleted: list[str] = []
    model = FakeChatModel([_call("delete_user", user_id="u-1"), "Kept the account."])
    agent = Agent(llm=model, tools=[_delete_tool(deleted)], checkpointer=MemorySaver(), middleware=guardrails())

    paused = await agent.ainvoke("delete u-1", thread_id="r")
    assert is_interrupt(paused)
    answer = await agent.ainvoke(decision={"type": "reject", "message": "not this one"}, thread_id="r")

    assert answer == "Kept the account." and deleted == []
    rejected = _last_tool_message(model)
    assert rejected.status == "error" and "not this one" in rejected.text


def test_an_edited_destructive_call_is_checked_again_before_it_runs(fetched: Counter) -> None:
    deleted: list[str] = []

    def drop_table(table: str, server: str) -> str:
        """Drop a database table."""
        deleted.append(table)
        return "dropped"

    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([_call("drop_table", table="tmp", server="db.example.com"), "done", "done again"])
    agent = Agent(
        llm=model,
        tools=[StructuredTool.from_function(drop_table)],
        checkpointer=MemorySaver(),
        middleware=guardrails(on_decision=decisions.append),
    )
    assert is_interrupt(agent.invoke("drop tmp", thread_id="e"))
    agent.invoke(decision={"type": "edit", "args": {"table": "users", "server": "10.0.0.5"}}, thread_id="e")

    assert deleted == [] and "private-network" in _last_tool_message(model).text
    assert [(d["policy_id"], d["action"]) for d in decisions] == [
        ("tool.destructive", "require_approval"),
        ("tool.destructive", "edited"),
        ("network.private", "block"),
    ]


@pytest.mark.parametrize(
    ("name", "metadata"),
    [
        ("delete_file", None),
        ("drop_index", None),
        ("rm", None),
        ("execute", None),
        ("archive_orders", {"destructive": True}),
        ("sync_ledger", {"writes": True}),
        ("fs__delete_tree", None),  # an MCP tool behind its server prefix
    ],
)
def test_strict_blocks_destructive_tools_without_asking(name: str, metadata: dict[str, Any] | None) -> None:
    ran: list[Any] = []

    def impl(target: str) -> str:
        ran.append(target)
        return "done"

    tool_ = StructuredTool.from_function(impl, name=name, description="Changes things.", metadata=metadata)
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([_call(name, target="x"), "I am not allowed to do that."])
    agent = Agent(
        llm=model,
        tools=[tool_],
        checkpointer=MemorySaver(),
        middleware=guardrails("strict", on_decision=decisions.append),
    )

    assert agent.invoke("do it", thread_id="s") == "I am not allowed to do that."
    assert ran == [] and agent.pending("s") is None
    assert decisions == [
        {"policy_id": "tool.destructive", "phase": "tool_input", "action": "block", "risk": "high", "tool": name}
    ]


@pytest.mark.parametrize(("name", "metadata"), [("archive_orders", {"destructive": True}), ("sync", {"writes": True})])
def test_standard_asks_for_tools_marked_destructive_by_metadata(name: str, metadata: dict[str, Any]) -> None:
    tool_ = StructuredTool.from_function(lambda target: "done", name=name, description="d", metadata=metadata)
    agent = Agent(
        llm=FakeChatModel([_call(name, target="x"), "ok"]),
        tools=[tool_],
        checkpointer=MemorySaver(),
        middleware=guardrails(),
    )
    assert is_interrupt(agent.invoke("go", thread_id="m"))


def test_destructive_false_metadata_opts_a_tool_out() -> None:
    ran: list[str] = []
    tool_ = StructuredTool.from_function(
        lambda target: ran.append(target) or "cleared",
        name="delete_draft",
        description="Delete an unsaved draft.",
        metadata={"destructive": False},
    )
    model = FakeChatModel([_call("delete_draft", target="d1"), "cleared"])
    Agent(llm=model, tools=[tool_], checkpointer=MemorySaver(), middleware=guardrails()).invoke("clear", thread_id="o")
    assert ran == ["d1"]


def test_tool_output_is_cut_to_the_limit_and_a_secret_at_the_cut_is_still_redacted() -> None:
    secret = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

    @tool
    def dump_logs() -> str:
        """Dump the service logs."""
        return "x" * 989 + " " + secret + "\n" + "y" * 50_000

    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([_call("dump_logs"), "The logs are long."])
    agent = Agent(
        llm=model, tools=[dump_logs], middleware=guardrails(max_tool_output_chars=1_000, on_decision=decisions.append)
    )
    agent.invoke("show logs")

    seen = _last_tool_message(model).text
    assert len(seen) < 1_100 and seen.startswith("x" * 989 + " [REDACTED:") and "TRUNCATED" in seen
    assert "ghp_A1b2" not in seen  # not even the part before the cut
    assert {d["policy_id"] for d in decisions} == {"secret.github_token", "tool.output_limit"}


def _broken_schema_tool(ran: list[str], metadata: dict[str, Any] | None) -> StructuredTool:
    # An unknown JSON-schema type makes the validator itself raise: a policy failure, not bad arguments.
    return StructuredTool.from_function(
        lambda q: ran.append(q) or "result",
        name="lookup",
        description="Look something up.",
        args_schema={"type": "object", "properties": {"q": {"type": "strng"}}, "required": ["q"]},
        metadata=metadata,
    )


@pytest.mark.parametrize(
    ("pack", "metadata", "runs"),
    [
        ("standard", None, False),  # unknown side effects: fail closed
        ("standard", {"writes": True}, False),
        ("standard", {"read_only": True}, True),  # explicitly read-only: audit and go on
        ("strict", {"read_only": True}, False),  # strict: every policy failure fails closed
    ],
)
def test_a_failing_policy_fails_closed_unless_the_tool_is_read_only(
    pack: str, metadata: dict[str, Any] | None, runs: bool
) -> None:
    ran: list[str] = []
    decisions: list[dict[str, Any]] = []
    model = FakeChatModel([_call("lookup", q="orders"), "done"])
    agent = Agent(
        llm=model,
        tools=[_broken_schema_tool(ran, metadata)],
        checkpointer=MemorySaver(),
        middleware=guardrails(pack, on_decision=decisions.append),  # type: ignore[arg-type]
    )
    agent.invoke("look up orders", thread_id="f")

    assert ran == (["orders"] if runs else [])
    actions = [(d["policy_id"], d["action"]) for d in decisions]
    assert ("guardrails.error", "audit" if runs else "block") in actions
    if not runs:
        assert "failed (UnknownType)" in _last_tool_message(model).text


async def test_parallel_destructive_calls_pause_together_and_each_answer_applies_once() -> None:
    ran: list[tuple[str, str]] = []

    def delete_a(x: str) -> str:
        """Delete a."""
        ran.append(("delete_a", x))
        return "a gone"

    def drop_b(x: str) -> str:
        """Drop b."""
        ran.append(("drop_b", x))
        return "b gone"

    def look(x: str) -> str:
        """Look something up."""
        ran.append(("look", x))
        return "seen"

    calls = [
        {"name": "delete_a", "args": {"x": "1"}},
        {"name": "drop_b", "args": {"x": "2"}},
        {"name": "look", "args": {"x": "3"}},
    ]
    model = FakeChatModel([{"tool_calls": calls}, "done"])
    tools = [StructuredTool.from_function(f) for f in (delete_a, drop_b, look)]
    agent = Agent(llm=model, tools=tools, checkpointer=MemorySaver(), middleware=guardrails())

    chunks = [c async for c in agent.astream("go", thread_id="p")]
    batch = chunks[-1]
    assert is_interrupt(batch) and sorted(i["tool_name"] for i in batch["items"]) == ["delete_a", "drop_b"]
    assert ran == [("look", "3")]  # the safe call ran while the others wait

    answers = {i["id"]: "approve" if i["tool_name"] == "delete_a" else "reject" for i in batch["items"]}
    assert await agent.ainvoke(decisions=answers, thread_id="p") == "done"
    assert ran == [("look", "3"), ("delete_a", "1")]  # nothing ran twice; the rejected call never ran
