"""Jev (TypeSafe System One) decisions: typed `classify()`, `JevClient`, `JevDecisionModel`.

See `classify` for the dict form and `ai_utils.jev.questions` for the typed form.
`classify()` needs no LangChain import; `JevDecisionModel` (LangChain) loads on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports
from ai_utils.jev._classify import aclassify, classify
from ai_utils.jev.client import JevClient
from ai_utils.jev.errors import JevAPIError, JevConnectionError, JevError, JevResponseError, JevTimeoutError
from ai_utils.jev.questions import (
    Answer,
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifyResult,
    NoulAnswer,
    NoulQuestion,
    Questions,
    ScoreAnswer,
    ScoreQuestion,
    Usage,
    choice,
    noul,
    score,
)
from ai_utils.jev.tool_caller._types import (
    ConfidenceGate,
    JevBelow,
    JevGated,
    JevInterrupt,
    JevMetadata,
    JevNoParamOptionsError,
    JevOutput,
    JevParamChoice,
    JevParamsError,
    JevProposalChangedError,
    JevReturn,
    JevTool,
    JevToolChoice,
)

if TYPE_CHECKING:
    from ai_utils.jev.decision_model import JevDecisionModel
    from ai_utils.jev.tool_caller import JevToolCaller

# Loaded on first access: these import LangChain / LangGraph, which `classify()` does not need.
_LAZY = {"JevDecisionModel": "ai_utils.jev.decision_model", "JevToolCaller": "ai_utils.jev.tool_caller"}

__all__ = [
    "Answer",
    "ChoiceAnswer",
    "ChoiceQuestion",
    "ClassifyResult",
    "ConfidenceGate",
    "JevAPIError",
    "JevBelow",
    "JevClient",
    "JevConnectionError",
    "JevDecisionModel",
    "JevError",
    "JevGated",
    "JevInterrupt",
    "JevMetadata",
    "JevNoParamOptionsError",
    "JevOutput",
    "JevParamChoice",
    "JevParamsError",
    "JevProposalChangedError",
    "JevResponseError",
    "JevReturn",
    "JevTimeoutError",
    "JevTool",
    "JevToolCaller",
    "JevToolChoice",
    "NoulAnswer",
    "NoulQuestion",
    "Questions",
    "ScoreAnswer",
    "ScoreQuestion",
    "Usage",
    "aclassify",
    "choice",
    "classify",
    "noul",
    "score",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
