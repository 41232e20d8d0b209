"""Gateway and audit trail: every model call of a feature is checked by a policy and written to SQLite.

A call for the registered feature `support` succeeds and is audited (who, which tenant, model, latency, tools);
a call for an unregistered feature is denied before any request leaves the process. Offline the agent runs a
scripted model; with OPENROUTER_API_KEY set it uses the real model of the route.
Run: `.venv/bin/python examples/gateway_audit.py`
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from ai_utils import Agent, Gateway, GatewayError, Route, SqliteAuditSink, get_llm
from ai_utils.testing import FakeChatModel

# LangChain logs a callback's exception before re-raising it; the denial below is expected, so keep it quiet.
logging.getLogger("langchain_core.callbacks.manager").setLevel(logging.ERROR)
ACTOR = {"user_id": "u1", "tenant_id": "acme"}


def lookup_ticket(ticket_id: str) -> str:
    """Look up a support ticket."""
    return f"ticket {ticket_id}: printer jam, opened yesterday"


def main() -> None:
    real = bool(os.environ.get("OPENROUTER_API_KEY"))
    print("(real provider via get_llm())" if real else "(offline: scripted model; set OPENROUTER_API_KEY)")
    with tempfile.TemporaryDirectory() as tmp:
        audit = SqliteAuditSink(Path(tmp) / "audit.sqlite")
        gateway = Gateway(routes=[Route("support", "openrouter", "openai/gpt-5.6-luna")], audit=audit)
        if real:
            llm = get_llm("openrouter", "openai/gpt-5.6-luna")  # or gateway.llm("support", actor=...) with callbacks
        else:
            call = {"name": "lookup_ticket", "args": {"ticket_id": "T-7"}}
            llm = FakeChatModel([{"tool_calls": [call]}, "Ticket T-7 is a printer jam from yesterday."], cycle=True)
        agent = Agent(llm=llm, prompt="You are a support agent.", tools=[lookup_ticket])

        answer = agent.invoke("What is ticket T-7 about?", callbacks=[gateway.callback("support", actor=ACTOR)])
        print(f"support -> {answer}")
        try:
            agent.invoke("hi", callbacks=[gateway.callback("marketing", actor=ACTOR)])
        except GatewayError as error:
            print(f"marketing -> denied: {error}")

        print("\naudit rows:")
        for row in audit.read():
            print(
                f"  {row['feature']:<9} {row['status']:<9} tenant={row['tenant_id']} model={row['model']} "
                f"latency={row['latency_ms']:.0f}ms tools_used={row['tools_used']}"
            )
        audit.close()


if __name__ == "__main__":
    main()
