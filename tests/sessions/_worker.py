"""One worker process for the durable-session tests: ``python _worker.py '<json>'``.

Keys:
  backend: "sqlite:<path>" or a Postgres URI; lease: lease_seconds; session: the session id
  action: "prompt" (prompt ``text``, wait for the result), "exit_after_prompt" (os._exit(0) right after
    prompt() returns), "recover" (recover() and wait until the session is idle), "prompts" (prompt every
    text of ``texts`` with message ids ``<prefix><i>``, then wait for all), "stream" (print s.stream(cursor))
  idempotent: how the tool `act` is declared; crash_marker: the first run of `act` creates this file and
    os._exit(3)s; runs_file: `act` appends its execution_id per run; hold_file: `act` waits for this file
  model_delay: seconds each model call sleeps; kind: "deep" runs a DeepAgent instead of an Agent
Prints one JSON line with the results and what the model saw ("sound": every call it saw was answered).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ai_utils import Agent, DeepAgent, durable_tool, postgres_sessions, sqlite_sessions
from ai_utils.testing import FunctionChatModel


def sound(messages: list[BaseMessage]) -> bool:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return all(c["id"] in answered for m in messages if isinstance(m, AIMessage) for c in m.tool_calls)


def _fakes(args: dict[str, Any]) -> tuple[Any, Any]:
    delay = float(args.get("model_delay", 0))

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        if delay:
            time.sleep(delay)
        # The note a continued turn adds for the model is not the user's message.
        said = [m for m in messages if not str(m.content).startswith("[system note]")]
        last = said[-1]
        if isinstance(last, HumanMessage) and str(last.content).startswith("act"):
            return {"tool_calls": [{"name": "act", "args": {"what": str(last.content)}}]}
        if isinstance(last, ToolMessage):
            return f"done ({last.status}): {last.text}"
        return f"echo: {last.text}"

    def act(what: str, execution_id: str) -> str:
        """Do something."""
        if args.get("runs_file"):
            with open(args["runs_file"], "a") as f:
                f.write(f"{os.getpid()} {execution_id}\n")
        marker = args.get("crash_marker")
        if marker and not Path(marker).exists():
            Path(marker).write_text("crashed")
            os._exit(3)
        hold = args.get("hold_file")
        if hold:
            Path(hold + ".running").write_text(str(os.getpid()))
            while not Path(hold).exists():
                time.sleep(0.02)
        return f"acted on {what} by {os.getpid()}"

    return reply, act


def main(args: dict[str, Any]) -> None:
    reply, act = _fakes(args)
    backend: str = args["backend"]
    lease = float(args.get("lease", 30.0))
    if backend.startswith("sqlite:"):
        store = sqlite_sessions(backend.removeprefix("sqlite:"), lease_seconds=lease)
    else:
        store = postgres_sessions(backend, lease_seconds=lease)
    model = FunctionChatModel(reply)
    tool = durable_tool(act, idempotent=bool(args.get("idempotent", True)))
    if args.get("kind") == "deep":
        agent: Agent | DeepAgent = DeepAgent(llm=model, tools=[tool], sessions=store, name="worker")
    else:
        agent = Agent(llm=model, tools=[tool], sessions=store, name="worker")
    out: dict[str, Any] = {"pid": os.getpid()}
    action = args["action"]
    s = agent.session(args["session"])
    if action == "exit_after_prompt":
        turn = s.prompt(args["text"])
        print(json.dumps({"turn_id": turn.id}), flush=True)
        os._exit(0)
    if action == "prompt":
        turn = s.prompt(args["text"], message_id=args.get("message_id"))
        out["result"] = turn.result(timeout=60).__dict__
    elif action == "recover":
        out["recovered"] = agent.recover()
        deadline = time.monotonic() + 60
        while store.busy(s.id) and time.monotonic() < deadline:
            time.sleep(0.05)
    elif action == "prompts":
        turns = [s.prompt(text, message_id=f"{args['prefix']}{i}") for i, text in enumerate(args["texts"])]
        out["results"] = [t.result(timeout=120).stop_reason for t in turns]
    elif action == "stream":
        out["lines"] = list(s.stream(int(args.get("cursor", 0))))
    out["calls"] = [[[m.type, m.text] for m in call] for call in model.calls]
    out["sound"] = [sound(call) for call in model.calls]
    out["history"] = [[m.type, m.text] for m in s.history()]
    print(json.dumps(out), flush=True)
    store.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
