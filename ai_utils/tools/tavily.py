"""`TavilySearch`: web search over Tavily as a LangChain tool (extra `tavily`).

```python
from ai_utils import TavilySearch, Agent

agent = Agent(tools=[TavilySearch(max_results=3, include_answer=True)])   # key from TAVILY_API_KEY
```
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Literal

import httpx
from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.tools import ArgsSchema, BaseTool, ToolException
from pydantic import BaseModel, Field, SecretStr, model_validator

from ai_utils._optional import missing_extra
from ai_utils.exceptions import UserError

try:
    from tavily import AsyncTavilyClient, TavilyClient
    from tavily import errors as tavily_errors
except ImportError as _import_error:
    raise missing_extra("tavily-python", extra="tavily", feature="the Tavily search tool") from _import_error

__all__ = ["TavilySearch", "TavilySearchInput", "tavily_search_tool"]

Topic = Literal["general", "news", "finance"]

# What a failed search raises: Tavily's own errors, `requests` errors (an OSError) from the sync
# client and httpx errors from the async one.
_SEARCH_ERRORS: tuple[type[Exception], ...] = (
    tavily_errors.BadRequestError,
    tavily_errors.ForbiddenError,
    tavily_errors.InvalidAPIKeyError,
    tavily_errors.UsageLimitExceededError,
    tavily_errors.TimeoutError,
    OSError,
    httpx.HTTPError,
)


class TavilySearchInput(BaseModel):
    """The model-facing arguments of `TavilySearch`."""

    query: str = Field(description="What to search the web for, as a search-engine query.")


class TavilySearch(BaseTool):
    """Search the web with Tavily; returns the top results (and Tavily's answer when asked for).

    The result is a JSON-able dict ``{"query", "results": [{"title", "url", "content"}], "answer"?}``.
    A failed search (bad key, quota, HTTP error) comes back to the model as an error message.

    Args:
        api_key: the Tavily key; defaults to the ``TAVILY_API_KEY`` environment variable.
        max_results: how many results to return (1-20).
        topic: ``"general"``, ``"news"`` or ``"finance"``.
        include_answer: also return Tavily's short LLM-written answer.
        api_base_url: another Tavily-compatible endpoint (a proxy, a test server).

    Raises:
        UserError: when neither ``api_key`` nor ``TAVILY_API_KEY`` is set.
    """

    name: str = "tavily_search"
    description: str = (
        "Search the web for current information. Input: a search query. "
        "Returns the top results with title, url and content."
    )
    args_schema: ArgsSchema | None = TavilySearchInput
    handle_tool_error: bool | str | Callable[[ToolException], Any] | None = True

    api_key: SecretStr
    max_results: int = Field(default=5, ge=1, le=20)
    topic: Topic = "general"
    include_answer: bool = False
    api_base_url: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _key_from_environment(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("api_key"):
            key = os.environ.get("TAVILY_API_KEY")
            if not key:
                raise UserError(
                    "TavilySearch needs a Tavily API key: pass `api_key=...` or set the TAVILY_API_KEY "
                    "environment variable (get a key at https://app.tavily.com)."
                )
            data = {**data, "api_key": key}
        return data

    def _run(self, query: str, run_manager: CallbackManagerForToolRun | None = None) -> dict[str, Any]:
        client = TavilyClient(api_key=self.api_key.get_secret_value(), api_base_url=self.api_base_url)
        try:
            raw = client.search(query, **self._options())
        except _SEARCH_ERRORS as exc:
            raise _search_failed(exc) from exc
        finally:
            client.close()
        return _compact(raw, query, include_answer=self.include_answer)

    async def _arun(self, query: str, run_manager: AsyncCallbackManagerForToolRun | None = None) -> dict[str, Any]:
        async with AsyncTavilyClient(api_key=self.api_key.get_secret_value(), api_base_url=self.api_base_url) as client:
            try:
                raw = await client.search(query, **self._options())
            except _SEARCH_ERRORS as exc:
                raise _search_failed(exc) from exc
        return _compact(raw, query, include_answer=self.include_answer)

    def _options(self) -> dict[str, Any]:
        return {"max_results": self.max_results, "topic": self.topic, "include_answer": self.include_answer}


def tavily_search_tool(
    *,
    api_key: str | None = None,
    max_results: int = 5,
    topic: Topic = "general",
    include_answer: bool = False,
    api_base_url: str | None = None,
) -> TavilySearch:
    """Build a configured `TavilySearch` tool (the seed's ``tavilySearchTool``).

    Args:
        api_key: the Tavily key; defaults to the ``TAVILY_API_KEY`` environment variable.
        max_results: how many results to return (1-20).
        topic: ``"general"``, ``"news"`` or ``"finance"``.
        include_answer: also return Tavily's short answer.
        api_base_url: another Tavily-compatible endpoint.

    Returns:
        The tool, ready for ``Agent(tools=[...])``.

    Raises:
        UserError: when neither ``api_key`` nor ``TAVILY_API_KEY`` is set.
    """
    return TavilySearch(
        api_key=api_key,  # type: ignore[arg-type]  # None is resolved from the environment by the validator
        max_results=max_results,
        topic=topic,
        include_answer=include_answer,
        api_base_url=api_base_url,
        metadata={"context_kind": "web.page"},  # wrapped as a fetched page under context_trust="enforce"
    )


def _compact(raw: Any, query: str, *, include_answer: bool) -> dict[str, Any]:
    results = raw.get("results", []) if isinstance(raw, dict) else []
    out: dict[str, Any] = {
        "query": raw.get("query", query) if isinstance(raw, dict) else query,
        "results": [
            {"title": item.get("title"), "url": item.get("url"), "content": item.get("content")}
            for item in results
            if isinstance(item, dict)
        ],
    }
    if include_answer:
        out["answer"] = raw.get("answer") if isinstance(raw, dict) else None
    return out


def _search_failed(exc: Exception) -> ToolException:
    detail = str(exc) or "no details"
    hint = ""
    if isinstance(exc, tavily_errors.InvalidAPIKeyError | tavily_errors.ForbiddenError):
        hint = " Check the Tavily API key (TAVILY_API_KEY)."
    elif isinstance(exc, tavily_errors.UsageLimitExceededError):
        hint = " The Tavily plan's usage limit is reached; retry later or raise the limit."
    return ToolException(f"Tavily search failed ({type(exc).__name__}): {detail}.{hint}")
