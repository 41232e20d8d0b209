"""The JS ``@langchain/langgraph-sdk`` ``Client`` (the one under ``useStream``) under Node against the LangGraph API:
a streamed run whose tool call waits for approval, the interrupt as ``useStream`` reads it, the resume with
``command: {resume}``, the history ``useStream`` fetches, and a rejoin with ``lastEventId``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def test_the_js_client_streams_an_approval_and_resumes_it(url: str, node: Callable[[str, dict[str, Any]], Any]) -> None:
    report = node("langgraph/langgraph_client.mjs", {"url": url, "apiKey": "alice-key"})
    assert report["runId"]
    assert report["firstEvents"][0] == "metadata" and report["firstEvents"][-1] == "end"
    (request,) = report["interrupt"]
    assert request["value"]["action_requests"] == [
        {"name": "refund", "args": {"order_id": "J-1"}, "description": "Refund this order?"}
    ]
    assert report["stateWhileWaiting"]["tasks"] == [1]  # useStream's threadHead.tasks[].interrupts

    assert report["secondEvents"][0] == "metadata" and report["secondEvents"][-1] == "end"
    final = report["finalMessages"]
    assert [m["type"] for m in final] == ["human", "ai", "tool", "ai"]
    assert final[-1]["content"] == "Done: refunded J-1." and "".join(report["tokens"]) == "Done: refunded J-1."
    assert report["historyLength"] >= 3 and report["historyHead"]["content"] == "Done: refunded J-1."

    first_ids = [i for i in report["firstIds"] if i is not None]
    rejoined = [i for i in report["rejoinedIds"] if i is not None]
    assert report["rejoinedEvents"][-1] == "end" and "metadata" not in report["rejoinedEvents"]
    assert int(rejoined[0]) > int(first_ids[0]) and rejoined[-1] == first_ids[-1]
    assert report["refused"]["status"] == 404 and "nobody" in report["refused"]["message"]
