"""Model profiles: name models by role, fall back when a provider fails, route cheap requests to cheap models.

A tiny OpenAI-compatible server on 127.0.0.1 (stdlib) plays the providers: `primary-model` answers 503
(overloaded), `strict-model` answers 400 (a bad request), every other model answers. Its request log shows
what `get_llm(profile=...)` tried: the 503 falls back to the next model, the 400 is raised at once and never
sent to another model. The gateway audit names the model each call went to. Then `resolve_model_route` picks
a profile per request: a rule on trusted labels, else the classifier (`classify()` on the fake Jev server).
Run: `.venv/bin/python examples/model_profiles.py`
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai

from ai_utils import Gateway, ModelProfiles, Route, get_llm, jev_route_classifier, resolve_model_route
from ai_utils.testing import FakeJevServer, MemoryAuditSink

logging.getLogger("langchain_core.callbacks.manager").setLevel(logging.ERROR)

LOG: list[tuple[str, int]] = []
FAILING = {"primary-model": (503, "upstream overloaded"), "strict-model": (400, "unsupported parameter")}


class Provider(BaseHTTPRequestHandler):
    """POST /v1/chat/completions in the OpenAI shape; logs (model, status)."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        model = body["model"]
        status, message = FAILING.get(model, (200, ""))
        LOG.append((model, status))
        if status != 200:
            reply: dict[str, Any] = {"error": {"message": message, "type": "server_error"}}
        else:
            answer = f"answered by {model}"
            reply = {
                "id": f"chatcmpl-{len(LOG)}", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
            }  # fmt: skip
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


profiles = ModelProfiles(
    {
        "fast": {"primary": "small-model", "hint": "Short, low-complexity requests."},
        "balanced": {
            "primary": "primary-model",
            "fallbacks": [{"profile": "fast"}, "backup-model"],
            "hint": "Requests that need stronger reasoning.",
        },
        "strict": {"primary": "strict-model", "fallbacks": ["backup-model"]},
    }
)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        print("balanced resolves to", profiles.resolve({"profile": "balanced"}))

        audit = MemoryAuditSink()
        gateway = Gateway(routes=[Route("support", "local", "balanced")], audit=audit, enforce_actor=False)
        llm = get_llm("local", profile="balanced", profiles=profiles, base_url=base_url)
        reply = llm.invoke("Hello!", config={"callbacks": [gateway.callback("support")]})
        print(f"\nbalanced: {reply.content!r} (response_metadata model_name={reply.response_metadata['model_name']})")
        print("  requests:", LOG)
        print("  audit:   ", [(row.model, row.status) for row in audit.entries])

        LOG.clear()
        try:
            get_llm("local", profile="strict", profiles=profiles, base_url=base_url).invoke("Hello!")
        except openai.BadRequestError as err:
            print(f"\nstrict: {type(err).__name__} raised at once: {err.message}")
        print("  requests:", LOG, "(a 400 is never retried on another model)")

        with FakeJevServer() as jev:
            classifier = jev_route_classifier(base_url=jev.url, api_key=jev.api_key)
            rules = [{"id": "free-users", "profile": "fast", "when": {"all_labels": ["tier:free"]}}]
            jev.answer("profile", choice="balanced", confidence=0.88)
            for text, labels in [("Plan our database migration.", ["tier:pro"]), ("Plan it.", ["tier:free"])]:
                route = resolve_model_route(
                    text, profiles=profiles, allowed=["fast", "balanced"], rules=rules, fallback="balanced",
                    labels=labels, classifier=classifier,
                )  # fmt: skip
                print(f"\nroute {text!r} {labels}: {route.profile} ({route.reason}, confidence={route.confidence})")
            jev.delay(1.0, times=1)
            slow = jev_route_classifier(base_url=jev.url, api_key=jev.api_key, timeout=0.2)
            route = resolve_model_route("Anything.", profiles=profiles, allowed=["fast", "balanced"],
                                        fallback="balanced", classifier=slow)  # fmt: skip
            print(f"route with a classifier timeout: {route.profile} ({route.reason})")
            print("classifier saw only:", jev.requests[0].body["state"])
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
