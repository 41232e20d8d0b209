"""`classify()` / `aclassify()`: one-shot typed decisions from Jev (choice, noul, score).

```python
result = classify(
    {"message": "I was charged twice. Please refund one charge urgently."},
    {
        "category": {"type": "choice", "instructions": "Which team should handle `message`?",
                     "criteria": {"billing": "Payments or refunds", "technical": "Bugs", "other": None}},
        "refund_requested": {"type": "noul", "instructions": "Does `message` explicitly request a refund?"},
    },
)
result.answers["category"].choice      # "billing"
```

For many calls, keep a `JevClient` (it reuses connections); for static types, pass a `Questions` class.
With ``llm=<chat model>`` the same questions are answered without Jev, from the model's label logprobs
(`ai_utils.jev._logprob`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload

from typing_extensions import TypedDict, Unpack

from ai_utils.exceptions import UserError
from ai_utils.jev._options import check_options
from ai_utils.jev._validation import Provider
from ai_utils.jev.client import DEFAULT_MODEL, JevClient, QuestionInput, shared_http_client
from ai_utils.jev.questions import Answer, ClassifyResult, Questions

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["ClassifyOptions", "aclassify", "classify"]

Q = TypeVar("Q", bound=Questions)


class ClassifyOptions(TypedDict, total=False):
    """The keyword options of `classify` and `aclassify` (one definition for both; see `classify`)."""

    model: str
    timeout: float | None
    api_key: str | None
    base_url: str | None
    provider: Provider
    llm: BaseChatModel | None


_JEV_DEFAULTS: dict[str, Any] = {
    "model": DEFAULT_MODEL,
    "timeout": None,
    "api_key": None,
    "base_url": None,
    "provider": "openrouter",
}


@overload
def classify(state: Any, questions: type[Q], **options: Unpack[ClassifyOptions]) -> ClassifyResult[Q]: ...
@overload
def classify(
    state: Any, questions: Mapping[str, QuestionInput], **options: Unpack[ClassifyOptions]
) -> ClassifyResult[dict[str, Answer]]: ...
def classify(state: Any, questions: Any, **options: Unpack[ClassifyOptions]) -> ClassifyResult[Any]:
    """Ask Jev typed questions about ``state``: choice (one label), noul (P(yes)), score (ordered scale).

    Args:
        state: what to judge: a string, a JSON object/array (refer to fields in backticks), or LangChain messages.
        questions: a dict of name -> question (``{"type": "choice"|"noul"|"score", "instructions", "criteria"}``
            or a `langchain_core.decisions` Choice/Noul/Score), or a `Questions` subclass for typed answers.
        model: the Jev model (default ``~typesafe/jev-latest``; pin e.g. ``typesafe/jev-1.13`` for stable thresholds).
        timeout: seconds for the whole call, retries included (default 30).
        api_key: default ``OPENROUTER_API_KEY`` (``TYPESAFE_API_KEY`` with ``provider="typesafe"``).
        base_url: the API root; default ``JEV_BASE_URL`` or ``https://openrouter.ai/api``. Requests go to
            ``{base_url}/alpha/decisions`` (TypeSafe: ``{base_url}/v1/systemone``).
        provider: ``"openrouter"`` (default) or ``"typesafe"`` for TypeSafe's own API.
        llm: answer with this chat model instead of Jev (no Jev request, no ``OPENROUTER_API_KEY`` needed):
            one request per question asks for a one-token label with ``logprobs``/``top_logprobs`` (20), and
            the label probabilities are renormalised over the labels. Labels are unambiguous single tokens:
            choice options are shown as letters ``A``..``Z`` (so at most 26 labels) and mapped back to your
            labels, score levels as digits ``0``..``9``, a noul as ``Yes``/``No``; token variants such as
            ``" a"`` count for their label. noul = P(Yes), score = expected level, confidence as Jev's.
            ``result.model`` is the model that answered, ``.usage`` sums the requests' tokens, ``.id`` is None.
            The model must return logprobs (OpenAI, vLLM, llama.cpp, recent Ollama, many OpenRouter
            providers; not reasoning models). The Jev options (``model``, ``timeout``, ``api_key``,
            ``base_url``, ``provider``) do not apply: configure the chat model instead.

    Returns:
        `ClassifyResult`: ``.answers`` (a dict, or an instance of the `Questions` class), ``.model``,
        ``.usage``, ``.id``.

    Raises:
        UserError: no API key, or invalid questions/state; raised before any request.
        JevAPIError: a non-2xx reply (408/429/5xx are retried twice first, honouring ``retry-after``).
        JevTimeoutError: no answer within ``timeout``.
        UserError: with ``llm``, a model reply without logprobs (naming the model), or a Jev option passed too.
        ModelOutputError: with ``llm``, no label among the first answer token's alternatives.
    """
    llm, jev = _split("classify", options)
    if llm is not None:
        from ai_utils.jev._logprob import classify_with_llm

        return classify_with_llm(llm, state, questions)
    return JevClient(**jev, http_client=shared_http_client()).classify(state, questions)


@overload
async def aclassify(state: Any, questions: type[Q], **options: Unpack[ClassifyOptions]) -> ClassifyResult[Q]: ...
@overload
async def aclassify(
    state: Any, questions: Mapping[str, QuestionInput], **options: Unpack[ClassifyOptions]
) -> ClassifyResult[dict[str, Answer]]: ...
async def aclassify(state: Any, questions: Any, **options: Unpack[ClassifyOptions]) -> ClassifyResult[Any]:
    """Async `classify`: the same arguments, result and errors. Cancelling the task aborts the HTTP request.

    With ``llm``, the requests (one per question) run concurrently.
    """
    llm, jev = _split("aclassify", options)
    if llm is not None:
        from ai_utils.jev._logprob import aclassify_with_llm

        return await aclassify_with_llm(llm, state, questions)
    async with JevClient(**jev) as client:
        result: ClassifyResult[Any] = await client.aclassify(state, questions)
    return result


def _split(entry: str, options: Mapping[str, Any]) -> tuple[BaseChatModel | None, dict[str, Any]]:
    """``(llm, the JevClient options)``; with ``llm``, no Jev option may differ from its default."""
    check_options(entry, options, ClassifyOptions)
    llm = options.get("llm")
    jev = {name: options.get(name, default) for name, default in _JEV_DEFAULTS.items()}
    given = [name for name, value in jev.items() if value != _JEV_DEFAULTS[name]]
    if llm is not None and given:
        raise UserError(
            f"classify(..., llm=...) answers with the chat model, so {', '.join(f'`{n}`' for n in given)} "
            "(Jev options) would be ignored. Drop them and configure the chat model instead, "
            "e.g. get_llm(..., timeout=10)."
        )
    return llm, jev
