"""One worker process for the durable-session tests: ``python _worker.py '<json>'``.

Keys:
  backend: "sqlite:<path>" or a Postgres URI; lease: lease_seconds; session: the session id
  action: "prompt" (prompt ``text``, wait for the result), "exit_after_prompt" (os._exit(0) right after
    prompt() returns), "recover" (recover(), or recover(wait=True) with ``wait`` (after a plain recover() as
    ``early`` with ``early``), and wait until the session is
    idle; ``recover_seconds`` is how long from recover() to idle), "prompts" (prompt every text of ``texts``
    with message ids ``<prefix><i>``, then wait for all), "stream" (print s.stream(cursor)), "resume"
    (s.resume() and wait)
  on_busy: the prompt's strategy (a SessionBusyError is reported as ``busy``); timeout / yield_in: the prompt's
    timeout and yield_at (seconds from now)
  idempotent: how the tool `act` is declared; crash_marker: the first run of `act` (or `whoami`) creates this
    file and os._exit(3)s; runs_file: `act` (and `delete_account`, `whoami`) append a line per run; hold_file: `act`
    waits for this file
  model_delay: seconds each model call sleeps; kind: "deep" runs a DeepAgent instead of an Agent
  hang_on: a model call whose last message has this text writes ``hang_file`` and hangs (to be killed in it);
    action "steer" steers the session with ``text``
  host: the host identity this worker claims leases under (AI_UTILS_HOST_ID: "another machine")
  modes: route turns with a KeywordModeRouter ("support" messages may only call `act`); the model then calls
    `delete_account` after `act` (what an injection would try)
  context: the user name given as the session's context (the tool `whoami` records what it sees)
  image: prompt ``text`` plus a PNG (base64 ``image``); model: the session's model (e.g. "local:vision")
Prints one JSON line with the results and what the model saw ("sound": every call it saw was answered).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ai_utils import (
    Agent,
    DeepAgent,
    KeywordModeRouter,
    ModeDefinition,
    SessionBusyError,
    durable_tool,
    postgres_sessions,
    sqlite_sessions,
)
from ai_utils.testing import FunctionChatModel


@dataclass
class Who:
    user: str


def sound(messages: list[BaseMessage]) -> bool:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return all(c["id"] in answered for m in messages if isinstance(m, AIMessage) for c in m.tool_calls)


def _record(args: dict[str, Any], line: str) -> None:
    if args.get("runs_file"):
        with open(args["runs_file"], "a") as f:
            f.write(line + "\n")


def _maybe_crash(args: dict[str, Any]) -> None:
    marker = args.get("crash_marker")
    if marker and not Path(marker).exists():
        Path(marker).write_text("crashed")
        os._exit(3)


def _fakes(args: dict[str, Any]) -> tuple[Any, list[Any]]:
    delay = float(args.get("model_delay", 0))

    def reply(messages: list[BaseMessage], tools: list[Any]) -> Any:
        if delay:
            time.sleep(delay)
        last = messages[-1]
        if args.get("hang_on") and last.text == args["hang_on"]:
            Path(args["hang_file"]).write_text(str(os.getpid()))
            time.sleep(600)  # killed in here: the model call never ends
        if isinstance(last, HumanMessage) and last.text.startswith(("act", "support")):
            return {"tool_calls": [{"name": "act", "args": {"what": last.text}}]}
        if isinstance(last, HumanMessage) and last.text.startswith("who"):
            return {"tool_calls": [{"name": "whoami", "args": {"note": last.text}}]}
        if isinstance(last, ToolMessage) and last.name == "act" and args.get("modes"):
            return {"tool_calls": [{"name": "delete_account", "args": {"user": "alice"}}]}
        if isinstance(last, ToolMessage):
            return f"done ({last.status}): {last.text}"
        return f"echo: {last.text}"

    def act(what: str, execution_id: str) -> str:
        """Do something."""
        _record(args, f"{os.getpid()} {execution_id}")
        _maybe_crash(args)
        hold = args.get("hold_file")
        if hold:
            Path(hold + ".running").write_text(str(os.getpid()))
            while not Path(hold).exists():
                time.sleep(0.02)
        return f"acted on {what} by {os.getpid()}"

    def delete_account(user: str) -> str:
        """Delete a user's account."""
        _record(args, f"DELETED {user}")
        return f"deleted {user}"

    @tool
    def whoami(note: str, runtime: ToolRuntime[Who]) -> str:
        """Say whose credentials this call runs with."""
        user = runtime.context.user if runtime.context is not None else "nobody"
        _record(args, f"WHO {user}")
        _maybe_crash(args)
        return f"running as {user}"

    tools = [
        durable_tool(act, idempotent=bool(args.get("idempotent", True))),
        durable_tool(delete_account, idempotent=False),
        durable_tool(whoami, idempotent=True),
    ]
    return reply, tools


ROUTER = KeywordModeRouter(
    default_mode=ModeDefinition(mode="admin", allowed_tools=["act", "delete_account", "whoami"]),
    rules=[{"keywords": ["support"], "mode": "support", "definition": {"allowed_tools": ["act"]}}],
)


def _wait_idle(store: Any, session_id: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while store.busy(session_id) and time.monotonic() < deadline:
        time.sleep(0.01)


def _agent(args: dict[str, Any], store: Any, model: FunctionChatModel, tools: list[Any]) -> Agent | DeepAgent:
    options: dict[str, Any] = {"sessions": store, "name": "worker", "context_schema": Who}
    if args.get("modes"):
        options["modes"] = ROUTER
    if args.get("kind") == "deep":
        return DeepAgent(llm=model, tools=tools, **options)
    return Agent(llm=model, tools=tools, **options)


def _prompt(args: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The prompt (text, or text and an image) and its options."""
    prompt: Any = args.get("text")
    if args.get("image"):
        image = {"type": "image", "data": args["image"], "mime_type": "image/png"}
        prompt = [{"type": "text", "text": args["text"]}, image]
    options: dict[str, Any] = {"message_id": args.get("message_id"), "on_busy": args.get("on_busy", "enqueue")}
    if args.get("timeout"):
        options["timeout"] = float(args["timeout"])
    if args.get("yield_in"):
        options["yield_at"] = time.time() + float(args["yield_in"])
    return prompt, options


def _act(args: dict[str, Any], agent: Any, store: Any, s: Any, out: dict[str, Any]) -> None:
    action = args["action"]
    prompt, options = _prompt(args)
    if action == "exit_after_prompt":
        turn = s.prompt(prompt, **options)
        print(json.dumps({"turn_id": turn.id}), flush=True)
        os._exit(0)
    if action == "prompt":
        try:
            turn = s.prompt(prompt, **options)
            print(json.dumps({"accepted": turn.id}), flush=True)
            out["result"] = turn.result(timeout=120).__dict__
        except SessionBusyError as error:
            out["busy"] = error.code
    elif action == "recover":
        if args.get("early"):
            out["early"] = agent.recover()  # before waiting: what recover() sees right now
        began = time.monotonic()
        out["recovered"] = agent.recover(wait=bool(args.get("wait")))
        out["recovered_at"] = time.time()
        _wait_idle(store, s.id)
        out["recover_seconds"] = time.monotonic() - began
    elif action == "resume":
        out["result"] = s.resume().result(timeout=120).__dict__
    elif action == "prompts":
        turns = [s.prompt(text, message_id=f"{args['prefix']}{i}") for i, text in enumerate(args["texts"])]
        out["results"] = [t.result(timeout=120).stop_reason for t in turns]
    elif action == "steer":
        out["steered"] = s.steer(args["text"], message_id=args.get("message_id"))
    elif action == "stream":
        out["lines"] = list(s.stream(int(args.get("cursor", 0))))


def main(args: dict[str, Any]) -> None:
    if args.get("host"):
        os.environ["AI_UTILS_HOST_ID"] = args["host"]
    reply, tools = _fakes(args)
    backend: str = args["backend"]
    lease = float(args.get("lease", 30.0))
    if backend.startswith("sqlite:"):
        store = sqlite_sessions(backend.removeprefix("sqlite:"), lease_seconds=lease)
    else:
        store = postgres_sessions(backend, lease_seconds=lease)
    model = FunctionChatModel(reply)
    agent = _agent(args, store, model, tools)
    out: dict[str, Any] = {"pid": os.getpid()}
    context = Who(args["context"]) if args.get("context") else None
    s = agent.session(args["session"], context=context, model=args.get("model"))
    _act(args, agent, store, s, out)
    out["calls"] = [[[m.type, m.text] for m in call] for call in model.calls]
    out["sound"] = [sound(call) for call in model.calls]
    out["history"] = [[m.type, m.text] for m in s.history()]
    print(json.dumps(out), flush=True)
    store.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
