"""Red team (issue #24): dodges of the private-network check and of destructive-name detection, each shown as the
attack (what the check used to let through, here run without guardrails) and then refused."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import StructuredTool

from ai_utils import Agent, MemorySaver, guardrails
from ai_utils.client import is_interrupt
from ai_utils.testing import FakeChatModel


class Sink:
    def __init__(self) -> None:
        self.ran: list[Any] = []

    def tool(self, name: str, schema: dict[str, Any] | None = None) -> StructuredTool:
        def run(**kwargs: Any) -> str:
            self.ran.append(kwargs)
            return "done"

        return StructuredTool.from_function(
            run, name=name, description=f"{name} tool.", args_schema=schema or {"type": "object", "properties": {}}
        )


def _attack(sink: Sink, tool: StructuredTool, args: dict[str, Any], middleware: Any = ()) -> tuple[Any, list[Any]]:
    decisions: list[Any] = []
    if middleware:
        middleware = middleware(decisions.append)
    model = FakeChatModel([{"tool_calls": [{"name": tool.name, "args": args}]}, "ok"])
    answer = Agent(llm=model, tools=[tool], checkpointer=MemorySaver(), middleware=middleware).invoke(
        "go", thread_id="t"
    )
    return answer, decisions


# Destinations written the way an HTTP client (httpx: IDNA, `key=value` tokens) or a shell will still reach them.
DODGES: list[dict[str, Any]] = [
    {"command": "curl --url=http://127.0.0.1/admin"},
    {"command": "wget --url=http://169.254.169.254/latest/meta-data/"},
    {"argv": ["fetch", "--target=http://10.0.0.5:8080/"]},
    {"options": "proxy=http://192.168.1.1:3128 timeout=5"},
    {"cli": "--host=2130706433 --port=22"},  # decimal loopback behind a destination key
    {"url": "http://127。0。0。1/admin"},  # ideographic full stop
    {"url": "http://127．0．0．1/admin"},  # full-width full stop
    {"url": "http://127｡0｡0｡1/admin"},  # half-width ideographic full stop
    {"url": "http://metadata。google。internal/computeMetadata/v1/"},
    {"url": "http://localhost｡/"},
    {"url": "https://example.com/redirect?next=http://localhost:8000/"},  # nested URL
    {
        "payload": {
            "a": {
                "b": {
                    "c": {
                        "d": {
                            "e": {
                                "f": {
                                    "g": {
                                        "h": {
                                            "i": {
                                                "j": {
                                                    "k": {
                                                        "l": {
                                                            "m": {"n": {"o": {"p": {"q": {"r": "http://10.0.0.1/"}}}}}
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    },  # deeper than the old 16-level walk
    {"servers": [{"name": f"s{i}", "host": "example.com"} for i in range(2_500)] + [{"host": "10.1.1.1"}]},
    {"target": {"host": 2130706433}},  # a number under a destination key
    {"http://127.0.0.1:2375/containers/json": "GET"},  # the destination as a key
]


@pytest.mark.parametrize("args", DODGES, ids=[str(i) for i in range(len(DODGES))])
def test_private_network_dodges_are_refused(args: dict[str, Any]) -> None:
    sink = Sink()
    call = sink.tool("http_request")

    # The attack: without the check the call runs with the private destination.
    _attack(sink, call, args)
    assert sink.ran == [args]

    sink.ran.clear()
    _, decisions = _attack(sink, call, args, lambda report: guardrails("standard", on_decision=report))
    assert sink.ran == []
    assert [(d["policy_id"], d["action"]) for d in decisions] == [("network.private", "block")]


TOO_DEEP: dict[str, Any] = {"v": "x"}
for _ in range(200):
    TOO_DEEP = {"v": TOO_DEEP}
TOO_BIG = {"items": ["a"] * 150_000}
TOO_LONG = {"blob": "x" * 5_000_000}


@pytest.mark.parametrize("args", [TOO_DEEP, TOO_BIG, TOO_LONG], ids=["deep", "many", "long"])
def test_values_past_the_scan_limits_are_blocked_under_strict(args: dict[str, Any]) -> None:
    sink = Sink()
    answer, decisions = _attack(sink, sink.tool("http_request"), args, lambda r: guardrails("strict", on_decision=r))
    assert answer == "ok" and sink.ran == []
    assert decisions == [
        {
            "policy_id": "guardrails.scan_limit",
            "phase": "tool_input",
            "action": "block",
            "risk": "high",
            "tool": "http_request",
            "reason": "scan_limit",
        }
    ]


@pytest.mark.parametrize("args", [TOO_DEEP, TOO_BIG], ids=["deep", "many"])
def test_values_past_the_scan_limits_are_untrusted_under_standard(args: dict[str, Any]) -> None:
    sink = Sink()
    answer, decisions = _attack(sink, sink.tool("http_request"), args, lambda r: guardrails("standard", on_decision=r))
    assert is_interrupt(answer) and sink.ran == []  # never passed unscanned: a person (or approve=) decides
    assert [(d["policy_id"], d["action"]) for d in decisions] == [("guardrails.scan_limit", "require_approval")]

    sink = Sink()
    _, decisions = _attack(
        sink, sink.tool("http_request"), args, lambda r: guardrails(approve=lambda call: False, on_decision=r)
    )
    assert sink.ran == [] and [d["action"] for d in decisions] == ["require_approval", "rejected"]


DESTRUCTIVE = [
    *("deleteUser", "Delete-User", "DROP_TABLE", "drop.table", "DeleteUser", "removeRecord", "purgeCache"),
    *("db__truncate_table", "user.destroy", "WIPE_DISK", "rm", "execute", "ExecuteSQL", "ＤＥＬＥＴＥ_USER"),
]


@pytest.mark.parametrize("name", DESTRUCTIVE)
def test_destructive_names_are_blocked_under_strict_whatever_their_case_or_separators(name: str) -> None:
    sink = Sink()
    # The attack: under the old exact-case prefix match these ran under strict without any approval.
    _attack(sink, sink.tool(name), {})
    assert sink.ran == [{}]

    sink = Sink()
    _, decisions = _attack(sink, sink.tool(name), {}, lambda report: guardrails("strict", on_decision=report))
    assert sink.ran == []
    assert [(d["policy_id"], d["action"]) for d in decisions] == [("tool.destructive", "block")]


@pytest.mark.parametrize("name", ["deleteUser", "DROP_TABLE", "drop.table"])
def test_destructive_names_wait_for_approval_under_standard(name: str) -> None:
    sink = Sink()
    answer, _ = _attack(sink, sink.tool(name), {}, lambda report: guardrails("standard", on_decision=report))
    assert is_interrupt(answer) and sink.ran == []


@pytest.mark.parametrize("name", ["get_user", "list_deleted_items", "dropdown_options", "crm_sync", "format_report"])
def test_harmless_names_run(name: str) -> None:
    sink = Sink()
    _attack(sink, sink.tool(name), {}, lambda report: guardrails("strict", on_decision=report))
    assert sink.ran == [{}]
