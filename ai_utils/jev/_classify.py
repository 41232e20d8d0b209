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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, overload

from ai_utils.jev._validation import Provider
from ai_utils.jev.client import DEFAULT_MODEL, JevClient, QuestionInput, shared_http_client
from ai_utils.jev.questions import Answer, ClassifyResult, Questions

__all__ = ["aclassify", "classify"]

Q = TypeVar("Q", bound=Questions)


@overload
def classify(
    state: Any,
    questions: type[Q],
    *,
    model: str = DEFAULT_MODEL,
    timeout: float | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    provider: Provider = "openrouter",
) -> ClassifyResult[Q]: ...
@overload
def classify(
    state: Any,
    questions: Mapping[str, QuestionInput],
    *,
    model: str = DEFAULT_MODEL,
    timeout: float | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    provider: Provider = "openrouter",
) -> ClassifyResult[dict[str, Answer]]: ...
def classify(
    state: Any,
    questions: Any,
    *,
    model: str = DEFAULT_MODEL,
    timeout: float | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    provider: Provider = "openrouter",
) -> ClassifyResult[Any]:
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

    Returns:
        `ClassifyResult`: ``.answers`` (a dict, or an instance of the `Questions` class), ``.model``,
        ``.usage``, ``.id``.

    Raises:
        UserError: no API key, or invalid questions/state; raised before any request.
        JevAPIError: a non-2xx reply (408/429/5xx are retried twice first, honouring ``retry-after``).
        JevTimeoutError: no answer within ``timeout``.
    """
    client = JevClient(
        api_key=api_key, base_url=base_url, provider=provider, model=model, timeout=timeout,
        http_client=shared_http_client(),
    )  # fmt: skip
    return client.classify(state, questions)


@overload
async def aclassify(
    state: Any,
    questions: type[Q],
    *,
    model: str = DEFAULT_MODEL,
    timeout: float | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    provider: Provider = "openrouter",
) -> ClassifyResult[Q]: ...
@overload
async def aclassify(
    state: Any,
    questions: Mapping[str, QuestionInput],
    *,
    model: str = DEFAULT_MODEL,
    timeout: float | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    provider: Provider = "openrouter",
) -> ClassifyResult[dict[str, Answer]]: ...
async def aclassify(
    state: Any,
    questions: Any,
    *,
    model: str = DEFAULT_MODEL,
    timeout: float | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    provider: Provider = "openrouter",
) -> ClassifyResult[Any]:
    """Async `classify`: the same arguments, result and errors. Cancelling the task aborts the HTTP request."""
    async with JevClient(api_key=api_key, base_url=base_url, provider=provider, model=model, timeout=timeout) as client:
        result: ClassifyResult[Any] = await client.aclassify(state, questions)
    return result
