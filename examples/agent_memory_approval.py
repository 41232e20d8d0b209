"""Agent with durable memory (SQLite) and human approval before a tool with side effects runs.

The run pauses at `send_mail` with a question; a second `invoke` with `decision="approve"` resumes it — even
from a new process, because the thread lives in SQLite. Offline a scripted model drives the run; with
OPENROUTER_API_KEY set the real model does. Run: `.venv/bin/python examples/agent_memory_approval.py`
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langgraph.types import Checkpointer

from ai_utils import Agent, get_llm, sqlite_saver
from ai_utils.testing import FakeChatModel

OUTBOX: list[str] = []


def send_mail(to: str, text: str) -> str:
    """Send an e-mail to a colleague."""
    OUTBOX.append(f"to {to}: {text}")
    return f"mail sent to {to}"


def pick_llm() -> BaseChatModel:
    if os.environ.get("OPENROUTER_API_KEY"):
        print("(real provider via get_llm())")
        return get_llm()
    print("(offline: scripted model; set OPENROUTER_API_KEY for the real one)")
    mail = {"name": "send_mail", "args": {"to": "bob@example.com", "text": "Meeting moved to 3 pm."}}
    return FakeChatModel([{"tool_calls": [mail]}, "Done - Bob knows the meeting is at 3 pm."])


def make_agent(saver: Checkpointer, llm: BaseChatModel) -> Agent:
    return Agent(
        llm=llm,
        prompt="You are an assistant that can send mails.",
        tools=[send_mail],
        checkpointer=saver,
        interrupt_on={"send_mail": {"decisions": ["approve", "reject"], "question": "Send this mail?"}},
    )


def main() -> None:
    llm = pick_llm()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "threads.sqlite"
        with sqlite_saver(db) as saver:
            paused = make_agent(saver, llm).invoke("Tell bob@example.com the meeting moved to 3 pm.", thread_id="u1")
        if not (isinstance(paused, dict) and paused["kind"] == "interrupt"):
            print(f"the model answered without sending a mail: {paused}")
            return
        print(
            f"[interrupt] {paused['question']} {paused['tool_name']}({paused['args']}) decisions={paused['decisions']}"
        )
        print(f"outbox before approval: {OUTBOX}")
        # A fresh saver and Agent on the same SQLite file continue the paused thread (as after a restart).
        with sqlite_saver(db) as saver:
            answer = make_agent(saver, llm).invoke(thread_id="u1", decision="approve")
        print(f"after approve: {answer}")
        print(f"outbox: {OUTBOX}")


if __name__ == "__main__":
    main()
