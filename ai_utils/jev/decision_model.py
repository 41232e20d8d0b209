"""`JevDecisionModel`: Jev as a LangChain `BaseDecisionModel` (for `AutoModeMiddleware`, `ModelRouterMiddleware`)."""

from __future__ import annotations

from typing import Any

import httpx
from langchain_core.decisions import Answer as LangChainAnswer
from langchain_core.decisions import (
    BaseDecisionModel,
    ChoiceAnswer,
    ClassifierResponse,
    NoulAnswer,
    Question,
    ScoreAnswer,
    State,
)
from langchain_core.language_models import BaseChatModel
from pydantic import ConfigDict, Field, PrivateAttr, SecretStr, model_validator

from ai_utils._compat.langchain_core import llm_type
from ai_utils.jev import _protocol as proto
from ai_utils.jev._logprob import aclassify_with_llm, classify_with_llm
from ai_utils.jev._validation import Provider
from ai_utils.jev.client import JevClient, shared_http_client, ssl_context
from ai_utils.jev.questions import Answer, ClassifyResult
from ai_utils.jev.questions import ChoiceAnswer as JevChoiceAnswer
from ai_utils.jev.questions import NoulAnswer as JevNoulAnswer

__all__ = ["JevDecisionModel"]


class JevDecisionModel(BaseDecisionModel):
    """Jev behind LangChain's decision-model interface.

    ```python
    from langchain.agents.middleware import AutoModeMiddleware

    auto_mode = AutoModeMiddleware(tools=["delete_file"], classifier=JevDecisionModel())
    ```

    Args:
        model: the Jev model id (default ``~typesafe/jev-latest``).
        api_key: default ``OPENROUTER_API_KEY`` (``TYPESAFE_API_KEY`` with ``provider="typesafe"``); kept secret.
        base_url: the API root; default ``JEV_BASE_URL`` or ``https://openrouter.ai/api``.
        timeout: seconds per request, retries included (default 30).
        provider: ``"openrouter"`` (default) or ``"typesafe"``.
        max_retries: retries of 408/429/5xx replies (default 2).
        llm: answer with this chat model's label logprobs instead of Jev, as ``classify(..., llm=...)`` does
            (no Jev key needed; the Jev options are then unused), so the decision middleware runs on any
            OpenAI-compatible model that returns logprobs.

    Raises:
        UserError: at construction when no API key is given or set (and no ``llm``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: str = proto.DEFAULT_MODEL
    api_key: SecretStr | None = Field(default=None, repr=False)
    base_url: str | None = None
    timeout: float | None = None
    provider: Provider = "openrouter"
    max_retries: int = proto.DEFAULT_MAX_RETRIES
    llm: BaseChatModel | None = Field(default=None, repr=False)

    _client: JevClient | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _make_client(self) -> JevDecisionModel:
        if self.llm is not None:
            if self.model == proto.DEFAULT_MODEL:  # traces then name the model that really answers
                self.model = str(
                    getattr(self.llm, "model_name", None) or getattr(self.llm, "model", None) or self.model
                )
            return self
        self._client = JevClient(
            api_key=self.api_key.get_secret_value() if self.api_key is not None else None,
            base_url=self.base_url,
            provider=self.provider,
            model=self.model,
            timeout=self.timeout,
            max_retries=self.max_retries,
            http_client=shared_http_client(),
        )
        return self

    @property
    def _provider(self) -> str:
        return llm_type(self.llm) if self.llm is not None else self.provider

    @property
    def _jev(self) -> JevClient:
        if self._client is None:  # pragma: no cover - built by the validator whenever llm is None
            raise RuntimeError("JevDecisionModel has no Jev client")
        return self._client

    def _classify(self, state: State, questions: dict[str, Question]) -> ClassifierResponse:
        if self.llm is not None:
            return _to_langchain(classify_with_llm(self.llm, state, questions))
        return _to_langchain(self._jev.classify(state, questions))

    async def _aclassify(self, state: State, questions: dict[str, Question]) -> ClassifierResponse:
        if self.llm is not None:
            return _to_langchain(await aclassify_with_llm(self.llm, state, questions))
        # A fresh pooled async client per call: an httpx.AsyncClient cannot move between event loops.
        async with httpx.AsyncClient(verify=ssl_context()) as http:
            result = await self._jev._aclassify_with(http, state, questions, model=None, timeout=None)
        return _to_langchain(result)


def _to_langchain(result: ClassifyResult[dict[str, Answer]]) -> ClassifierResponse:
    answers: dict[str, LangChainAnswer] = {}
    for name, answer in result.answers.items():
        if isinstance(answer, JevNoulAnswer):
            answers[name] = NoulAnswer(type="noul", noul=answer.noul)
        elif isinstance(answer, JevChoiceAnswer):
            answers[name] = ChoiceAnswer(
                type="choice", choice=answer.choice, probabilities=answer.probabilities, confidence=answer.confidence
            )
        else:
            answers[name] = ScoreAnswer(
                type="score",
                score=answer.score,
                legend=answer.legend,
                probabilities=answer.probabilities,
                confidence=answer.confidence,
            )
    usage: dict[str, Any] = {
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "total_tokens": result.usage.total_tokens,
    }
    return ClassifierResponse.model_validate(
        {"model": result.model, "answers": answers, "usage": usage, "request_id": result.id}
    )
