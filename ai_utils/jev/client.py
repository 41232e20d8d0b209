"""`JevClient`: the Jev decisions API over httpx, sync and async, on one sans-IO core (`_protocol`)."""

from __future__ import annotations

import atexit
import ssl
import threading
import time
from collections.abc import Generator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from types import TracebackType
from typing import Any, TypeAlias, TypeVar, overload

import anyio
import httpx
from pydantic import BaseModel

from ai_utils.exceptions import UserError
from ai_utils.jev import _protocol as proto
from ai_utils.jev._validation import Provider, QuestionSpec
from ai_utils.jev.questions import Answer, ClassifyResult, Questions

__all__ = ["DEFAULT_MODEL", "JevClient", "QuestionInput"]

DEFAULT_MODEL = proto.DEFAULT_MODEL
Q = TypeVar("Q", bound=Questions)
QuestionInput: TypeAlias = Mapping[str, Any] | QuestionSpec | BaseModel
"""A question: a dict ``{"type", "instructions", "criteria"}`` or a `langchain_core.decisions` Choice/Noul/Score."""

_shared_lock = threading.Lock()
_shared_ssl: ssl.SSLContext | None = None
_shared_client: httpx.Client | None = None


def ssl_context() -> ssl.SSLContext:
    """One process-wide SSL context: building one costs ~50 ms, so clients share it."""
    global _shared_ssl
    with _shared_lock:
        if _shared_ssl is None:
            _shared_ssl = httpx.create_ssl_context()
        return _shared_ssl


def shared_http_client() -> httpx.Client:
    """The process-wide pooled `httpx.Client` behind `classify()` (thread-safe; closed at exit)."""
    global _shared_client
    context = ssl_context()
    with _shared_lock:
        if _shared_client is None:
            _shared_client = httpx.Client(verify=context)
            atexit.register(_shared_client.close)
        return _shared_client


# The stdlib bases give `with` / `async with` (entering returns the client); we only close on exit.
class JevClient(AbstractContextManager["JevClient", None], AbstractAsyncContextManager["JevClient", None]):
    """A client for Jev decisions (OpenRouter ``/api/alpha/decisions`` or TypeSafe ``/v1/systemone``).

    Reuse one client for many calls: it keeps connections open. Close it (or use ``with`` / ``async with``)
    when done. httpx clients are created lazily, or pass your own (`http_client`, `async_http_client`;
    those are never closed by us). An async client is bound to the event loop it first ran in.

    ```python
    with JevClient() as jev:  # key from OPENROUTER_API_KEY
        result = jev.classify({"message": "Refund please"}, {"refund": {"type": "noul", "instructions": "..."}})
    ```

    Args:
        api_key: the API key; default from ``OPENROUTER_API_KEY`` (``TYPESAFE_API_KEY`` for ``provider="typesafe"``).
        base_url: the API root; default from ``JEV_BASE_URL`` or ``https://openrouter.ai/api``
            (TypeSafe: ``TYPESAFE_BASE_URL`` or ``https://api.typesafe.ai``).
        provider: ``"openrouter"`` (default) or ``"typesafe"`` (TypeSafe direct).
        model: the default model id; OpenRouter ids like ``~typesafe/jev-latest`` are mapped to TypeSafe's bare ids.
        timeout: seconds for a whole call, retries included (default 30).
        max_retries: retries of 408/429/5xx replies and connection errors (default 2).
        max_retry_wait: the longest wait before a retry; a ``retry-after`` asking for more is not retried.
        headers: extra request headers (e.g. ``{"X-OpenRouter-Title": "my app"}``).
        http_client: an `httpx.Client` to use for sync calls.
        async_http_client: an `httpx.AsyncClient` to use for async calls.

    Raises:
        UserError: when no API key is given or set, or an argument is invalid.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        provider: Provider = "openrouter",
        model: str = DEFAULT_MODEL,
        timeout: float | None = None,
        max_retries: int = proto.DEFAULT_MAX_RETRIES,
        max_retry_wait: float = proto.DEFAULT_MAX_RETRY_WAIT,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._endpoint = proto.resolve_endpoint(provider=provider, api_key=api_key, base_url=base_url, headers=headers)
        proto.resolve_model(provider, model)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise UserError(f"`max_retries` must be an int >= 0, got {max_retries!r}.")
        if not isinstance(max_retry_wait, int | float) or max_retry_wait < 0:
            raise UserError(f"`max_retry_wait` must be a number of seconds >= 0, got {max_retry_wait!r}.")
        self.model = model
        self.timeout = proto.check_timeout(timeout)
        self.max_retries = max_retries
        self.max_retry_wait = float(max_retry_wait)
        self._http_client = http_client
        self._owns_http_client = http_client is None
        self._async_http_client = async_http_client
        self._owns_async_http_client = async_http_client is None

    @property
    def provider(self) -> Provider:
        """``"openrouter"`` or ``"typesafe"``."""
        return self._endpoint.provider

    @property
    def url(self) -> str:
        """The URL requests are POSTed to."""
        return self._endpoint.url

    def __repr__(self) -> str:
        return f"JevClient(provider={self.provider!r}, url={self.url!r}, model={self.model!r})"

    @overload
    def classify(
        self, state: Any, questions: type[Q], *, model: str | None = None, timeout: float | None = None
    ) -> ClassifyResult[Q]: ...
    @overload
    def classify(
        self,
        state: Any,
        questions: Mapping[str, QuestionInput],
        *,
        model: str | None = None,
        timeout: float | None = None,
    ) -> ClassifyResult[dict[str, Answer]]: ...
    def classify(
        self, state: Any, questions: Any, *, model: str | None = None, timeout: float | None = None
    ) -> ClassifyResult[Any]:
        """Ask Jev ``questions`` about ``state`` and wait for the typed answers.

        Args:
            state: what to judge: a string, a JSON object/array, or LangChain messages (also nested).
            questions: a dict of name -> question, or a `Questions` subclass (typed answers).
            model: the model id for this call (default: the client's).
            timeout: seconds for this call, retries included (default: the client's).

        Returns:
            The answers with the model version, usage and request id.

        Raises:
            UserError: invalid questions or state (nothing is sent).
            JevAPIError: a non-2xx reply (after retries for 408/429/5xx); `JevResponseError` for a bad 2xx reply.
            JevTimeoutError: no answer within the timeout.
            JevConnectionError: the server could not be reached.
        """
        steps = self._steps(state, questions, model, timeout)
        return _drive_sync(steps, self._sync_client())

    @overload
    async def aclassify(
        self, state: Any, questions: type[Q], *, model: str | None = None, timeout: float | None = None
    ) -> ClassifyResult[Q]: ...
    @overload
    async def aclassify(
        self,
        state: Any,
        questions: Mapping[str, QuestionInput],
        *,
        model: str | None = None,
        timeout: float | None = None,
    ) -> ClassifyResult[dict[str, Answer]]: ...
    async def aclassify(
        self, state: Any, questions: Any, *, model: str | None = None, timeout: float | None = None
    ) -> ClassifyResult[Any]:
        """Async `classify`: the same arguments, errors and result. Cancelling the task aborts the HTTP request."""
        steps = self._steps(state, questions, model, timeout)
        return await _drive_async(steps, self._async_client())

    async def _aclassify_with(
        self, client: httpx.AsyncClient, state: Any, questions: Any, *, model: str | None, timeout: float | None
    ) -> ClassifyResult[Any]:
        return await _drive_async(self._steps(state, questions, model, timeout), client)

    def _steps(
        self, state: Any, questions: Any, model: str | None, timeout: float | None
    ) -> Generator[proto.Send | proto.Sleep, proto.Outcome, ClassifyResult[Any]]:
        seconds = self.timeout if timeout is None else proto.check_timeout(timeout)
        plan = proto.plan_questions(questions, self.provider)
        request = proto.build_request(self._endpoint, plan, state, model=model or self.model)
        return proto.exchange(
            plan,
            request,
            timeout=seconds,
            max_retries=self.max_retries,
            max_retry_wait=self.max_retry_wait,
            key_env=self._endpoint.key_env,
        )

    def _sync_client(self) -> httpx.Client:
        if self._http_client is None:
            self._http_client = httpx.Client(verify=ssl_context())
        return self._http_client

    def _async_client(self) -> httpx.AsyncClient:
        if self._async_http_client is None:
            self._async_http_client = httpx.AsyncClient(verify=ssl_context())
        return self._async_http_client

    def close(self) -> None:
        """Close the sync httpx client if this client created it."""
        if self._owns_http_client and self._http_client is not None:
            self._http_client.close()
            self._http_client = None

    async def aclose(self) -> None:
        """Close the httpx clients this client created."""
        self.close()
        if self._owns_async_http_client and self._async_http_client is not None:
            await self._async_http_client.aclose()
            self._async_http_client = None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


Steps = Generator[proto.Send | proto.Sleep, proto.Outcome, ClassifyResult[Any]]


def _prepare(send: proto.Send, client: httpx.Client | httpx.AsyncClient) -> None:
    """Bound this attempt by the time left and add the httpx client's default headers (ours win)."""
    send.request.extensions["timeout"] = proto.request_timeout(send.timeout)
    for name, value in client.headers.items():
        if name not in send.request.headers:
            send.request.headers[name] = value


def _drive_sync(steps: Steps, client: httpx.Client) -> ClassifyResult[Any]:
    try:
        action = next(steps)
        while True:
            outcome: proto.Outcome = None
            if isinstance(action, proto.Send):
                _prepare(action, client)
                try:
                    outcome = client.send(action.request)
                except httpx.TransportError as exc:
                    outcome = exc
            else:
                time.sleep(action.seconds)
            action = steps.send(outcome)
    except StopIteration as stop:
        result: ClassifyResult[Any] = stop.value
        return result
    finally:
        steps.close()


async def _drive_async(steps: Steps, client: httpx.AsyncClient) -> ClassifyResult[Any]:
    try:
        action = next(steps)
        while True:
            outcome: proto.Outcome = None
            if isinstance(action, proto.Send):
                _prepare(action, client)
                try:
                    with anyio.fail_after(action.timeout):
                        outcome = await client.send(action.request)
                except TimeoutError:
                    outcome = proto.TIMED_OUT
                except httpx.TransportError as exc:
                    outcome = exc
            else:
                await anyio.sleep(action.seconds)
            action = steps.send(outcome)
    except StopIteration as stop:
        result: ClassifyResult[Any] = stop.value
        return result
    finally:
        steps.close()
