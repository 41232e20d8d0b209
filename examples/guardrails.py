"""Guardrails: one policy engine over a support agent's input, tool calls, tool results and answers.

The customer pastes an API key; a tool result carries an AWS key; the model tries the cloud metadata address,
then wants to delete an account. With ``guardrails("standard")`` the model never sees a secret, the metadata
URL is never fetched, and the deletion waits for a human. Every decision goes to the console and, through the
gateway callbacks, into the SQLite audit row of the model call it belongs to, without the secrets. The same
agent under ``"strict"`` blocks the deletion outright. Offline the agent runs a scripted model.
Run: `.venv/bin/python examples/guardrails.py`
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from ai_utils import Agent, Gateway, MemorySaver, Route, SqliteAuditSink, guardrails
from ai_utils.testing import FunctionChatModel

API_KEY = "sk-proj-4fGh7Jk2Lm9Np3Qr5St8Uv1Wx6Yz0Ab2Cd"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
ACTOR = {"user_id": "agent-7", "tenant_id": "acme"}
fetched: list[str] = []
deleted: list[str] = []


def read_ticket(ticket_id: str) -> str:
    """Read a support ticket."""
    return f"Ticket {ticket_id}: 'my deploy fails, aws_access_key_id={AWS_KEY}'"


def fetch_url(url: str) -> str:
    """Fetch a web page."""
    fetched.append(url)
    return "page"


def delete_account(account_id: str) -> str:
    """Delete a customer account."""
    deleted.append(account_id)
    return f"account {account_id} deleted"


CALLS = [
    {"name": "read_ticket", "args": {"ticket_id": "T-9"}},
    {"name": "fetch_url", "args": {"url": "http://169.254.169.254/latest/meta-data/iam"}},
    {"name": "delete_account", "args": {"account_id": "acme-old"}},
]


def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> Any:
    """A scripted support model: the three calls in turn, then a summary of the last tool result."""
    results = [m for m in messages if isinstance(m, ToolMessage)]
    if len(results) < len(CALLS):
        return {"tool_calls": [CALLS[len(results)]]}
    last = results[-1]
    return f"Done: {last.text}" if last.status != "error" else f"I could not do that: {last.text.split(':')[0]}."


def show(decision: dict[str, Any]) -> None:
    tool = f" tool={decision['tool']}" if "tool" in decision else ""
    print(f"  decision: {decision['policy_id']:<24} {decision['phase']:<11} {decision['action']:<16}{tool}")


def run(pack: str, audit: SqliteAuditSink) -> None:
    print(f"--- guardrails({pack!r})")
    gateway = Gateway(routes=[Route("support", "openrouter", "openai/gpt-5.6-luna")], audit=audit)
    llm = FunctionChatModel(reply)
    agent = Agent(
        llm=llm,
        tools=[read_ticket, fetch_url, delete_account],
        checkpointer=MemorySaver(),
        middleware=guardrails(pack, on_decision=show),  # type: ignore[arg-type]
        callbacks=[gateway.callback("support", actor=ACTOR)],
    )
    result = agent.invoke(f"Ticket T-9 please. My OpenAI key is {API_KEY}.", thread_id=pack)
    if isinstance(result, dict) and result.get("kind") == "interrupt":
        print(f"  approval needed: {result['tool_name']}({result['args']})  -> approve")
        result = agent.invoke(decision="approve", thread_id=pack)
    print(f"  answer: {result}")
    seen = "\n".join(str(m.content) for call in llm.calls for m in call)
    print(f"  model saw a secret: {API_KEY in seen or AWS_KEY in seen}; fetched: {fetched}; deleted: {deleted}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        audit = SqliteAuditSink(Path(tmp) / "audit.sqlite")
        run("standard", audit)
        deleted.clear()
        run("strict", audit)
        rows = audit.read()
        guarded = sum(1 for row in rows for d in row["policy_decisions"] if "policy_id" in d)
        dumped = json.dumps(rows, default=str)
        print(f"audit: {len(rows)} rows, {guarded} guardrail decisions, secrets in rows: {API_KEY in dumped}")
        audit.close()


if __name__ == "__main__":
    main()
