"""What one guardrails instance enforces, per run: the pack, the mode, the bounds, and how a run may tighten them.

`Settings` is immutable and decided once when the middleware is built; a run may only tighten it, with
``config={"configurable": {"guardrails": "strict"}}`` (`run_settings`), never loosen it (`UserError`). The seed's
rule for a request that asks for more: it cannot turn guardrails on from nothing, select a weaker pack, or replace a
custom policy; a standard (or custom) policy becomes strict with its rules kept, fail-closed policy failures and
buffered output. ``stricter_than=`` applies the same rule between two instances (`merge_stricter`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from langchain_core.runnables.config import var_child_runnable_config

from ai_utils.exceptions import UserError
from ai_utils.guard._host import Approver, HostPolicies
from ai_utils.guard._rules import GuardrailDecision, OnDecision, PolicyPack, Rule, StreamingMode

if TYPE_CHECKING:
    from ai_utils.guard._engine import Guardrails

__all__ = ["CONFIG_KEY", "Settings", "check_stricter", "merge_stricter", "run_settings"]

CONFIG_KEY: Final = "guardrails"
"""``config["configurable"]`` key a run uses to ask for a stricter pack (``"strict"``)."""
_RANK: Final = {"standard": 0, "custom": 0, "strict": 1}


@dataclass(frozen=True, slots=True)
class Settings:
    """The effective behaviour of one guardrails instance for one run."""

    pack: PolicyPack
    strict: bool
    enforce: bool
    streaming: StreamingMode
    max_final_output_chars: int | None

    @property
    def buffer(self) -> bool:
        """Whether streamed answers wait for the output policies (only when decisions act)."""
        return self.enforce and self.streaming == "buffer"

    def tightened(self) -> Settings:
        """The strict form: destructive tools blocked, failing policies block, output buffered."""
        return dataclasses.replace(self, strict=True, streaming="buffer")


def _requested(value: object, settings: Settings) -> Settings:
    if isinstance(value, Mapping):  # the seed's request shape: {"policyPack": "strict"}
        if not set(value) <= {"policy_pack", "policyPack"}:
            raise UserError(
                f"config['configurable']['guardrails'] takes only a pack ('strict' or {{'policy_pack': 'strict'}}), "
                f"got {value!r}; a run cannot change rules, policies or limits."
            )
        value = value.get("policy_pack", value.get("policyPack"))
    if value is None or value == settings.pack or (value == "strict" and settings.strict):
        return settings
    if value == "strict":
        return settings.tightened()
    if value in ("standard", "custom"):
        raise UserError(
            f"config['configurable']['guardrails']={value!r} would loosen this agent's {settings.pack!r} guardrails "
            f"for the run; a run may only tighten them. Pass 'strict' or leave it out."
        )
    raise UserError(
        f"config['configurable']['guardrails'] must be 'strict' (the only pack a run may ask for), got {value!r}."
    )


def run_settings(base: Settings, tight: Settings, config: Mapping[str, Any] | None = None) -> Settings:
    """The settings of the running call: ``base``, or ``tight`` when the run's config asks for ``"strict"``.

    Args:
        base: the instance's settings.
        tight: ``base.tightened()`` (precomputed: this runs on every hook).
        config: the run's config (default: the config of the runnable in this context).

    Raises:
        UserError: the run asks for a looser or unknown pack.
    """
    if config is None:
        config = var_child_runnable_config.get()
        if config is None:
            return base
    configurable = config.get("configurable")
    value = configurable.get(CONFIG_KEY) if isinstance(configurable, Mapping) else None
    if value is None:
        return base
    return tight if _requested(value, base) is not base else base


def check_stricter(own: Settings, rules: tuple[Rule, ...], baseline: Guardrails | str) -> None:
    """Refuse a pack or mode looser than ``baseline`` (an instance or a pack name) before merging with it.

    Raises:
        UserError: naming what would be looser and how to fix it.
    """
    if isinstance(baseline, str):
        if baseline not in ("standard", "strict"):
            raise UserError(
                f"stricter_than must be a guardrails(...) instance or 'standard'/'strict', got {baseline!r}."
            )
        if _RANK[baseline] > _RANK["strict" if own.strict else own.pack]:
            raise UserError(f"guardrails({own.pack!r}) is looser than stricter_than={baseline!r}; pass 'strict'.")
        return
    base: Settings = baseline._base
    if base.strict and not own.strict:
        raise UserError(
            f"guardrails({own.pack!r}) is looser than the strict guardrails it must be stricter than; pass 'strict'."
        )
    if base.enforce and not own.enforce:
        raise UserError(
            "mode='audit' would turn off what the enforcing guardrails it must be stricter than decide; "
            "pass mode='enforce'."
        )
    mine = {rule.id: rule for rule in rules}
    for rule in baseline._policies.rules:
        if rule.id in mine and mine[rule.id] != rule:
            raise UserError(
                f"content rule {rule.id!r} differs from the one in the guardrails it must be stricter than; a "
                "stricter instance keeps the baseline's rules. Rename yours or leave it out."
            )


def merge_stricter(
    baseline: Guardrails,
    settings: Settings,
    rules: tuple[Any, ...],
    host: HostPolicies,
    on_decision: OnDecision | None,
    approve: Approver | None,
    max_tool_output_chars: int,
) -> tuple[Settings, tuple[Any, ...], HostPolicies, OnDecision | None, Approver | None, int]:
    """``stricter_than=baseline``: its rules, host policies, reporting, approval and bounds kept, ours added on top."""
    base = baseline._base
    if approve is not None and baseline._approve is not None and approve is not baseline._approve:
        raise UserError(
            "approve= differs from the approve= of the guardrails it must be stricter than; leave it out to keep "
            "theirs."
        )
    if approve is not None and baseline._approve is None and not base.strict:
        raise UserError(
            "approve= would answer in code the approvals the guardrails it must be stricter than ask a person for; "
            "leave it out."
        )
    mine = {rule.id for rule in rules}
    merged_rules = (*(r for r in baseline._policies.rules if r.id not in mine), *rules)
    limits = [v for v in (base.max_final_output_chars, settings.max_final_output_chars) if v is not None]
    merged = Settings(
        pack=settings.pack,
        strict=settings.strict or base.strict,
        enforce=settings.enforce,
        streaming="buffer" if "buffer" in (settings.streaming, base.streaming) else "audit",
        max_final_output_chars=min(limits) if limits else None,
    )
    theirs = baseline.on_decision
    report = on_decision
    if theirs is not None and on_decision is not None and theirs is not on_decision:
        report = _both(theirs, on_decision)
    elif theirs is not None:
        report = theirs
    policies = HostPolicies(
        [*baseline._host.callables, *(p for p in host.callables if p not in baseline._host.callables)]
    )
    tool_chars = min(max_tool_output_chars, baseline.max_tool_output_chars)
    return merged, merged_rules, policies, report, approve or baseline._approve, tool_chars


def _both(first: OnDecision, second: OnDecision) -> OnDecision:
    """Report to the baseline's ``on_decision`` and then ours (awaiting either when it is async)."""

    def report(event: GuardrailDecision) -> Any:
        one = first(dict(event))  # type: ignore[arg-type]
        two = second(dict(event))  # type: ignore[arg-type]
        awaitables = [r for r in (one, two) if hasattr(r, "__await__")]
        if not awaitables:
            return None

        async def wait() -> None:
            for pending in awaitables:
                await pending

        return wait()

    return report
