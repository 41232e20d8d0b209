"""`guardrails(...)`, the public factory of the guardrails middleware."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ai_utils.guard._engine import Guardrails
from ai_utils.guard._host import Approver, HostPolicy
from ai_utils.guard._rules import ContentRule, GuardMode, OnDecision, PolicyPack, StreamingMode

__all__ = ["guardrails"]


def guardrails(
    policy_pack: PolicyPack = "standard",
    *,
    content_rules: Sequence[ContentRule] | Sequence[Mapping[str, Any]] = (),
    on_decision: OnDecision | None = None,
    max_tool_output_chars: int = 256_000,
    streaming: StreamingMode = "audit",
    mode: GuardMode = "enforce",
    max_final_output_chars: int | None = None,
    policies: Sequence[HostPolicy] = (),
    approve: Approver | None = None,
    stricter_than: Guardrails | PolicyPack | None = None,
) -> Guardrails:
    """One ordered policy engine over input, retrieved context, tool input, tool output and final output.

    Use it as ``create_agent`` middleware: ``Agent(..., middleware=guardrails("standard"))`` (also `DeepAgent`
    and ``LoopRunner`` agent steps).

    Packs:
        ``"standard"``: redacts secrets in user input, tool results (retrieved context) and the model's answer
        before the model or the client sees them, as ``[REDACTED:<kind>]``. Shapes (kinds): private-key blocks
        (``private_key``), JWTs (``jwt``), Anthropic ``sk-ant-…`` (``anthropic_api_key``), OpenRouter ``sk-or-…``
        (``openrouter_api_key``), OpenAI ``sk-…``/``sk-proj-…`` (``openai_api_key``), AWS access key ids
        ``AKIA…``/``ASIA…`` (``aws_access_key``) and secret keys after ``aws_secret_access_key=``
        (``aws_secret_key``), GitHub ``ghp_…``/``gho_…``/``ghu_…``/``ghs_…``/``ghr_…``/``github_pat_…``
        (``github_token``), Slack ``xox?-…`` (``slack_token``), Google ``AIza…`` (``google_api_key``), Stripe
        ``sk_live_…``/``rk_live_…`` (``stripe_key``) and ``Bearer <token>`` (``bearer_token``). Validates tool
        arguments against the tool's schema before dispatch (invalid: an error result, the tool does not run).
        Blocks tool calls whose arguments name a private, loopback, link-local, metadata or reserved destination
        (URLs, hosts, IPv4 also in decimal/hex/octal, IPv6 also IPv4-mapped; ``localhost``-like names) without
        running the tool. Destructive tools (metadata ``destructive=True`` / ``writes=True``, MCP
        ``destructiveHint``, names ``delete_*``, ``drop_*``, ``rm``, ``execute``) wait for approval: the run
        pauses with the usual interrupt chunk and resumes with ``decision="approve"`` / ``"reject"`` / an edit.
        ``"strict"``: standard, plus destructive tools are blocked instead, any failing policy blocks (fails
        closed), and streamed answers are buffered so nothing unredacted reaches a stream.
        ``"custom"``: standard plus ``content_rules``.

    Tools run at most once, and their results are cut to ``max_tool_output_chars`` before the model sees them. A
    policy that raises blocks the call of a side-effecting or unknown tool; for an explicitly read-only tool
    (metadata ``read_only=True``) the standard pack records an ``audit`` decision and goes on. A failing text
    policy (input, context, output) always blocks. Arguments too deep or too large to scan whole (past 64 levels,
    100,000 items or 4,000,000 characters) are never passed unscanned: blocked under ``"strict"``, untrusted (they
    need approval) otherwise.

    Secrets the user typed are redacted before the first write: ``Agent``/``DeepAgent`` runs and durable sessions
    hand their input to `Guardrails.redact_input` before any checkpoint, session row or stream line holds it.
    Reasoning (``reasoning_content``, reasoning/thinking content blocks) and structured answers are scanned like
    answer text.

    A run may tighten the pack for itself with ``config={"configurable": {"guardrails": "strict"}}`` (rules, host
    policies and bounds are kept); asking for a looser pack raises `UserError`.

    Each message is scanned once: a turn scans only the messages newer than the last one the engine has seen, and
    redacted copies replace the originals in the thread, so later turns (and a new process) read redacted history.
    The destination check reads literal values only; enforce network egress after DNS resolution as well. A
    `DeepAgent`'s subagents run their own middleware: add ``guardrails(...)`` to a subagent's ``middleware`` to
    cover its tools too.

    Args:
        policy_pack: ``"standard"``, ``"strict"`` or ``"custom"``.
        content_rules: (custom only) ``[{"id", "phases": [...], "action": "redact" | "block", "contains_any":
            [literal strings], "replacement"?, "risk"?}]``; phases from ``"input"``, ``"context"`` (also tool
            results), ``"tool_input"``, ``"tool_output"``, ``"output"``. Literals only, matched case-insensitively:
            regular expressions are not accepted. A blocked input ends the turn with the replacement text.
        on_decision: called with every decision ``{"policy_id", "phase", "action", "risk", "tool"?}`` (never the
            content); sync, or async on async runs. With gateway callbacks the same decisions go into the audit
            row of the model call they precede (or, for the answer, follow) as ``policy_decisions``.
        max_tool_output_chars: the longest tool result the model sees.
        streaming: ``"audit"`` (default: streamed text is delivered as it comes and only the stored answer is
            redacted) or ``"buffer"`` (the answer is streamed only after the output policies ran; always on under
            ``"strict"``).
        mode: ``"enforce"`` (default) or ``"audit"``: every decision is made and reported exactly as under
            ``"enforce"`` (``on_decision``, gateway audit rows), but nothing is changed: no redaction, block, cut,
            approval pause or buffering — the run behaves byte for byte as without guardrails. For rollouts.
        max_final_output_chars: cut each answer's text to this many characters (a ``truncate`` decision,
            ``output.limit``).
        policies: host policies ``(phase, payload) -> PolicyResult | None``, sync or async, run in order after the
            built-in ones (see `ai_utils.guard.PolicyResult`): ``payload`` is the text for ``"input"``,
            ``"context"`` and ``"output"``, ``{"tool", "args"}`` for ``"tool_input"`` and ``{"tool", "text"}`` for
            ``"tool_output"``. Each call is bounded to 1 s: a policy that raises, times out or answers something
            malformed blocks what it looked at under ``"strict"`` (fails closed) and is reported (an ``audit``
            decision with ``reason``) otherwise.
        approve: ``(tool_call) -> bool``, sync or async: answers approvals (destructive tools, unscannable
            arguments, a host policy's ``"require_approval"``) in code instead of a HITL interrupt; anything but
            ``True``, an exception too, denies (the tool does not run). Under ``"strict"`` destructive tools stay
            blocked.
        stricter_than: a baseline ``guardrails(...)`` (or pack name) this instance may only tighten: a looser pack
            or ``mode="audit"`` over an enforcing baseline raises `UserError`; the baseline's rules, host policies,
            ``on_decision``, ``approve`` and bounds are kept, and ours are added (for per-request policies built
            from a project's).

    Returns:
        The middleware (also a one-item list of itself, so it can be passed as ``middleware=`` directly).

    Raises:
        UserError: an unknown pack, mode or streaming mode, rules outside ``"custom"`` (or none in it), a malformed
            or regex rule, a non-positive ``max_tool_output_chars``/``max_final_output_chars``, a non-callable
            ``on_decision``, ``approve`` or policy, or a ``stricter_than`` this instance would loosen.

    Example:
        ```python
        agent = Agent(llm=llm, tools=[fetch_url, delete_user], checkpointer=MemorySaver(),
                      middleware=guardrails("standard", on_decision=print))
        ```
    """
    return Guardrails(
        policy_pack=policy_pack,
        content_rules=content_rules,
        on_decision=on_decision,
        max_tool_output_chars=max_tool_output_chars,
        streaming=streaming,
        mode=mode,
        max_final_output_chars=max_final_output_chars,
        policies=policies,
        approve=approve,
        stricter_than=stricter_than,
    )
