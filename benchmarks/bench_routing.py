"""Routing (SPEC §17): the mode middleware's turn tax, rule routing latency, cached profile resolution.

- ``Agent(modes=router)`` turn vs the same Agent built with the mode's tools passed statically and the same
  system prompt (the mode instruction as its prompt): the price of routing per turn, target <= 1.05, async and
  sync. The moded agent has six tools of which the mode offers one; the static agent has that one tool.
- The same turn vs the static agent plus a no-op middleware of one ``wrap_model_call`` hook (a plain method
  handing back the handler's awaitable). ``create_agent`` wraps every such hook in langsmith's ``traceable`` and
  composes the handlers, about 40 µs per model call with tracing off; the report rows "no-op wrap middleware /
  static" show that LangChain-side cost alone. The Agent's router pays none of it: it rides on the model-call
  hook the Agent's repair step already has, so these rows sit below 1.
- ``resolve_model_route`` decided by a label rule: an absolute guard of 20 µs per call.
- ``ModelProfiles.resolve`` from the cache vs a first resolution on a fresh instance (nested profiles with
  fallbacks): the cache must make repeat lookups at least 5x cheaper.
"""

from __future__ import annotations

from typing import Any

from _fixtures import PLAIN_PROMPT, TOOL_PROMPT, add, scripted_model
from _harness import Metric, Session
from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import tool

from ai_utils import (
    Agent,
    KeywordModeRouter,
    ModeDefinition,
    ModelProfiles,
    build_mode_tool_instruction,
    build_system_content,
    resolve_model_route,
)

PROMPT = "You are a careful calculator."
ROUTE_GUARD_US = 20.0


def _extra_tool(i: int) -> Any:
    @tool(f"other_{i}")
    def other(text: str) -> str:
        """Another tool the calc mode does not offer."""
        return text

    return other


ROUTER = KeywordModeRouter(
    default_mode=ModeDefinition(mode="general", allowed_tools=["add"]),
    rules=[
        {"keywords": ["refund", "invoice"], "mode": "billing", "definition": {"allowed_tools": ["other_0", "other_1"]}},
        {
            "keywords": ["calc", "compute"],
            "mode": "calc",
            "definition": {"allowed_tools": ["add"]},
            "exclude": ["what is"],
        },
    ],
)


async def _awaited(pending: Any) -> Any:
    return await pending


class NoopWrap(AgentMiddleware[Any, Any, Any]):
    """A middleware with the same hook as the mode middleware that does nothing: LangChain's own cost of one."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return _awaited(handler(request))


def _agents() -> tuple[Agent, Agent, Agent]:
    model = scripted_model()
    moded = Agent(llm=model, prompt=PROMPT, tools=[add, *(_extra_tool(i) for i in range(5))], modes=ROUTER)
    static_prompt = build_system_content([PROMPT, build_mode_tool_instruction(mode="calc", tool_names=["add"])])
    static = Agent(llm=model, prompt=static_prompt, tools=[add])
    noop = Agent(llm=model, prompt=static_prompt, tools=[add], middleware=[NoopWrap()])
    return moded, static, noop


def _turn(agent: Agent, prompt: str) -> Any:
    async def sample() -> None:
        await agent.ainvoke(prompt)

    return sample


def _sync_turn(agent: Agent, prompt: str) -> Any:
    def sample() -> None:
        agent.invoke(prompt)

    return sample


PROFILES_SPEC: dict[str, Any] = {
    "tiny": "vendor/tiny",
    "fast": {"primary": "vendor/fast", "fallbacks": [{"profile": "tiny"}]},
    "balanced": {"primary": "vendor/balanced", "fallbacks": [{"profile": "fast"}, "vendor/other"]},
    "premium": {"primary": "vendor/premium", "fallbacks": [{"profile": "balanced"}, {"profile": "fast"}]},
    "default": {"profile": "premium"},
}
PROFILES = ModelProfiles(PROFILES_SPEC)
RULES = [
    {"id": "internal", "profile": "premium", "when": {"all_labels": ["staff"]}},
    {"id": "free-users", "profile": "fast", "when": {"all_labels": ["tier:free"]}},
]
ALLOWED = ["fast", "balanced", "premium"]
LABELS = ["tier:free", "region:eu"]


def _route_guard(session: Session) -> tuple[float, float]:
    calls = 2000

    def sample() -> None:
        for _ in range(calls):
            resolve_model_route(
                "Summarize this.", profiles=PROFILES, allowed=ALLOWED, rules=RULES, fallback="balanced", labels=LABELS
            )

    m = session.medians({"ours": sample})
    return m["ours"] / calls * 1e6, ROUTE_GUARD_US


def _cache(session: Session) -> tuple[float, float]:
    calls = 500
    fresh = [ModelProfiles(PROFILES_SPEC) for _ in range(calls * 50)]
    used = iter(fresh)

    def cached() -> None:
        for _ in range(calls):
            PROFILES.resolve({"profile": "default"})

    def first() -> None:
        for _ in range(calls):
            next(used).resolve({"profile": "default"})

    m = session.medians({"cached": cached, "first": first})
    return m["cached"] / calls * 1e6, m["first"] / calls * 1e6


def metrics() -> list[Metric]:
    moded, static, noop = _agents()
    assert ROUTER.resolve(TOOL_PROMPT).mode == "calc" and ROUTER.resolve(PLAIN_PROMPT).mode == "general"
    note = "same FunctionChatModel; ours: 6 tools + modes=router (mode offers `add`); anchor: tools=[add], same prompt."
    plain = "compute nothing, just answer"  # routed to the calc mode, answered without a tool
    out: list[Metric] = []
    for steps, prompt in ((1, TOOL_PROMPT), (0, plain)):
        out.append(
            Metric(
                f"Agent(modes=router).ainvoke / Agent(mode's tools static).ainvoke (steps={steps})",
                _turn(moded, prompt),
                _turn(static, prompt),
                1.05,
                note=note,
            )
        )
        out.append(
            Metric(
                f"Agent(modes=router).invoke / Agent(mode's tools static).invoke (sync, steps={steps})",
                _sync_turn(moded, prompt),
                _sync_turn(static, prompt),
                1.05,
                note=note,
            )
        )
    for steps, prompt in ((1, TOOL_PROMPT), (0, plain)):
        out.append(
            Metric(
                f"Agent(modes=router).ainvoke / Agent(static tools + a no-op wrap middleware).ainvoke (steps={steps})",
                _turn(moded, prompt),
                _turn(noop, prompt),
                1.05,
                note="the anchor pays LangChain's cost of one more wrap hook; the router rides on an existing one.",
            )
        )
        out.append(
            Metric(
                "Agent(modes=router).invoke / Agent(static tools + a no-op wrap middleware).invoke "
                f"(sync, steps={steps})",
                _sync_turn(moded, prompt),
                _sync_turn(noop, prompt),
                1.05,
                note="the routing code's own cost on the sync path.",
            )
        )
    for steps, prompt in ((1, TOOL_PROMPT), (0, plain)):
        out.append(
            Metric(
                "Agent(static tools + a no-op wrap middleware).ainvoke / Agent(static tools).ainvoke "
                f"(steps={steps}, report)",
                _turn(noop, prompt),
                _turn(static, prompt),
                None,
                note="LangChain's cost of any wrap_model_call middleware (langsmith `traceable` around the hook plus "
                "handler composition), with tracing off: the floor under the modes/static rows.",
            )
        )
        out.append(
            Metric(
                "Agent(static tools + a no-op wrap middleware).invoke / Agent(static tools).invoke "
                f"(sync, steps={steps}, report)",
                _sync_turn(noop, prompt),
                _sync_turn(static, prompt),
                None,
                note="the same LangChain-side floor on the sync path.",
            )
        )
    out += [
        Metric(
            "guard: resolve_model_route decided by a rule / 20 µs",
            measure=_route_guard,
            target=1.0,
            unit="µs",
            note="absolute guard: explicit checks of allowed/fallback/rules on every call, cached profile lookup.",
        ),
        Metric(
            "ModelProfiles.resolve cached / first resolution (4 nested profiles, 5 models)",
            measure=_cache,
            target=0.2,
            unit="µs",
            note="the cache makes a repeat lookup at least 5x cheaper than resolving the profile tree.",
        ),
    ]
    return out
