"""The data of `JevToolCaller`: tool definitions, the confidence gate, outputs and errors.

Outputs are pydantic models. ``value`` fields hold the original Python objects (the candidate instances
and the tool's return value); ``model_dump(mode="json")`` / ``model_dump_json()`` render them as JSON
(pydantic models, dataclasses, dicts, ... ; other objects by their attributes or ``str``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_serializer
from pydantic_core import to_jsonable_python

from ai_utils.exceptions import AiUtilsError, UserError

__all__ = [
    "ConfidenceGate",
    "JevBelow",
    "JevGated",
    "JevInterrupt",
    "JevMetadata",
    "JevNoParamOptionsError",
    "JevOutput",
    "JevParamChoice",
    "JevParamsError",
    "JevProposalChangedError",
    "JevReturn",
    "JevTool",
    "JevToolChoice",
    "ParamsProvider",
    "to_json",
]

ParamsProvider: TypeAlias = Mapping[str, Any] | Callable[..., Mapping[str, Any] | Awaitable[Mapping[str, Any]]]
"""A tool's ``params``: ``{name: [candidates]}`` or a (sync/async) callable ``(*, context, state, thread_id)``."""


def _fallback(value: Any) -> Any:
    attributes = getattr(value, "__dict__", None)
    return dict(attributes) if isinstance(attributes, dict) else str(value)


def to_json(value: Any) -> Any:
    """``value`` as plain JSON data: what Jev sees of a candidate, what the history stores of a tool result.

    Pydantic models, dataclasses, dicts, lists, dates, ... are rendered by pydantic; other objects by their
    attributes (``vars``), else ``str``. The rendering is stable across processes (no memory addresses).
    """
    return to_jsonable_python(value, fallback=_fallback)


@dataclasses.dataclass(frozen=True)
class JevTool:
    """One tool `JevToolCaller` may pick.

    Args:
        name: unique, non-empty; Jev picks tools by name.
        description: when this tool is the right one (sent to Jev).
        func: sync or async; called exactly once with keyword arguments ``context``, ``state``,
            ``thread_id`` and ``params`` (it may declare only the ones it needs, or ``**kwargs``).
        params: the allowed values per argument: a mapping ``{name: [candidate, ...]}`` or a sync/async
            callable ``(*, context, state, thread_id) -> mapping``, evaluated only after Jev picked this tool.
    """

    name: str
    description: str
    func: Callable[..., Any]
    params: ParamsProvider | None = None


@dataclasses.dataclass(frozen=True)
class ConfidenceGate:
    """The always-on quality gate: below its threshold a proposal is returned as `JevGated`, never run.

    The threshold of a tool is ``tools[name]``, else ``min_confidence``, else 0.5; it applies to the tool
    choice and to every parameter choice. ``min_confidence=0`` switches the gate off.

    Args:
        min_confidence: the default threshold (0..1).
        tools: thresholds per tool name (MCP tools: ``<server>__<tool>``).
    """

    min_confidence: float | None = None
    tools: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.tools, Mapping):
            raise UserError(f"ConfidenceGate `tools` must map tool names to thresholds, got {self.tools!r}.")
        for where, value in [("min_confidence", self.min_confidence), *self.tools.items()]:
            if value is None and where == "min_confidence":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise UserError(f"ConfidenceGate threshold {where!r} must be a number from 0 to 1, got {value!r}.")
        object.__setattr__(self, "tools", dict(self.tools))

    def threshold(self, tool: str) -> float:
        """The threshold for ``tool``: ``tools[tool] ?? min_confidence ?? 0.5``."""
        value = self.tools.get(tool, self.min_confidence)
        return 0.5 if value is None else float(value)


class _Output(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    def __getitem__(self, key: str) -> Any:
        """Dict-style access (``below[0]["scope"]``), as in the seed's JSON shapes."""
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)


class JevToolChoice(_Output):
    """The picked tool: its name and Jev's confidence (1.0 for `JevToolCaller.call_tool`)."""

    name: str
    confidence: float


class JevParamChoice(_Output):
    """One picked parameter: the original candidate object and Jev's confidence (1.0 when deterministic)."""

    value: Any
    confidence: float

    @field_serializer("value")
    def _value_json(self, value: Any) -> Any:
        return to_json(value)


class JevBelow(_Output):
    """A confidence below its gate threshold; ``scope`` is ``"tool"`` or ``"params.<name>"``."""

    scope: str
    confidence: float
    required: float


class JevMetadata(_Output):
    """What ``debug=True`` adds. Never contains ``context``.

    Attributes:
        selected_tool: ``{"name", "confidence", "probabilities"}`` of the tool choice.
        selected_params: per parameter ``{"value", "index", "candidates", "confidence", "deterministic"}``.
        arguments: the ``params`` handed to ``func``, as JSON.
        usage: ``{"input_tokens", "output_tokens", "cost", "calls"}`` summed over the Jev calls of this proposal.
        state: ``{"system_prompt", "message_history"}`` as sent to Jev and handed to ``func``.
    """

    selected_tool: dict[str, Any] | None
    selected_params: dict[str, dict[str, Any]]
    arguments: dict[str, Any] | None
    usage: dict[str, Any]
    state: dict[str, Any]


class JevReturn(_Output):
    """``func`` ran (or was rejected): its return value, the tool and params that were used.

    Attributes:
        value: what ``func`` returned; ``None`` when rejected.
        rejected: ``True`` when a human rejected the proposal; ``func`` never ran.
    """

    kind: Literal["return"] = "return"
    value: Any = None
    tool: JevToolChoice
    params: dict[str, JevParamChoice] = Field(default_factory=dict)
    rejected: bool = False
    metadata: JevMetadata | None = None

    @field_serializer("value")
    def _value_json(self, value: Any) -> Any:
        return to_json(value)


class JevGated(_Output):
    """A confidence was below the gate: nothing ran. Ask the user, or override with ``call_tool``."""

    kind: Literal["gated"] = "gated"
    tool: JevToolChoice
    params: dict[str, JevParamChoice] = Field(default_factory=dict)
    below: list[JevBelow]
    metadata: JevMetadata | None = None


class JevInterrupt(_Output):
    """The proposal waits for a human: resume with ``invoke(thread_id=..., decision="approve" | "reject")``."""

    kind: Literal["interrupt"] = "interrupt"
    question: str
    tool: JevToolChoice
    params: dict[str, JevParamChoice] = Field(default_factory=dict)
    metadata: JevMetadata | None = None


JevOutput: TypeAlias = JevReturn | JevGated | JevInterrupt
"""What `JevToolCaller.invoke` returns; dispatch on ``.kind``."""


class JevNoParamOptionsError(AiUtilsError):
    """The picked tool's ``params`` gave an empty candidate list, so the tool cannot run.

    An expected outcome (a search found nothing): show an empty state. ``code`` is stable for API boundaries.

    Attributes:
        tool_name: the picked tool.
        parameter_name: the parameter without candidates.
        code: ``"JEV_NO_PARAM_OPTIONS"``.
    """

    code = "JEV_NO_PARAM_OPTIONS"

    def __init__(self, tool_name: str, parameter_name: str) -> None:
        super().__init__(
            f"Tool {tool_name!r} has no candidates for parameter {parameter_name!r} (its `params` gave an empty "
            "list), so it cannot run. Handle this as an empty result, or return at least one candidate."
        )
        self.tool_name = tool_name
        self.parameter_name = parameter_name


class JevParamsError(AiUtilsError, TypeError):
    """A tool's ``params`` are malformed (not lists), or ``call_tool`` params are not among the candidates."""


class JevProposalChangedError(AiUtilsError):
    """On resume, the approved candidate is no longer among the values the tool's ``params`` return; nothing ran."""
