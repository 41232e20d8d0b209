"""Sans-IO core of the Jev client: endpoint/key resolution, request building, reply parsing, retry policy.

Nothing here does I/O. `exchange()` is a generator that yields what to do next (`Send` a request,
`Sleep`) and receives the outcome; `JevClient.classify` drives it over `httpx.Client`,
`JevClient.aclassify` over `httpx.AsyncClient`. Wire facts: `reference/jev-protocol.md`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import sys
import time
import weakref
from collections.abc import Callable, Generator, Mapping
from typing import Annotated, Any, Final, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Discriminator, Tag, ValidationError

from ai_utils.exceptions import UserError
from ai_utils.jev._retry import api_error, backoff, body_of, retry_delay, timeout_error
from ai_utils.jev._validation import Provider, safe_label_keys, wire_question
from ai_utils.jev.errors import JevConnectionError, JevResponseError
from ai_utils.jev.questions import ChoiceAnswer, ClassifyResult, NoulAnswer, Questions, ScoreAnswer, Usage

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_WAIT",
    "DEFAULT_MODEL",
    "DEFAULT_TIMEOUT",
    "Endpoint",
    "Plan",
    "Send",
    "Sleep",
    "build_request",
    "exchange",
    "parse_response",
    "plan_questions",
    "resolve_endpoint",
]

DEFAULT_MODEL: Final = "~typesafe/jev-latest"
DEFAULT_TIMEOUT: Final = 30.0
"""Seconds for the whole call, retries included, when the caller gives no ``timeout``."""
DEFAULT_MAX_RETRIES: Final = 2
DEFAULT_MAX_RETRY_WAIT: Final = 30.0
"""Longest wait before a retry; a ``retry-after`` asking for more gives up at once."""
MAX_REQUEST_TOKENS: Final = 64_000
REQUEST_OVERHEAD_TOKENS: Final = 270
_PROVIDERS: dict[str, tuple[str, str, str, str]] = {
    # provider: (default base URL, base URL env, path, key env)
    "openrouter": ("https://openrouter.ai/api", "JEV_BASE_URL", "/alpha/decisions", "OPENROUTER_API_KEY"),
    "typesafe": ("https://api.typesafe.ai", "TYPESAFE_BASE_URL", "/v1/systemone", "TYPESAFE_API_KEY"),
}


def _user_agent() -> str:
    from ai_utils import __version__

    return f"ai-utils/{__version__}"


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """Where and how to send requests. The key never shows in the repr."""

    provider: Provider
    url: str
    key_env: str
    api_key: str = dataclasses.field(repr=False)
    headers: httpx.Headers = dataclasses.field(repr=False)
    http_url: httpx.URL = dataclasses.field(repr=False)
    """The parsed URL: parsing it per request would cost more than all our own work."""


def resolve_endpoint(
    *,
    provider: Provider = "openrouter",
    api_key: str | None = None,
    base_url: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Endpoint:
    """Pick the URL and key: arguments first, then the environment, then the provider's defaults.

    Raises:
        UserError: for an unknown provider or when no API key is given or set.
    """
    if provider not in _PROVIDERS:
        raise UserError(f"Unknown Jev provider {provider!r}. Use 'openrouter' or 'typesafe'.")
    default_base, base_env, path, key_env = _PROVIDERS[provider]
    key = api_key if api_key is not None else os.environ.get(key_env)
    if not key or not key.strip():
        raise UserError(f"No API key for Jev ({provider}). Pass `api_key=` or set {key_env}.")
    base = (base_url or os.environ.get(base_env) or default_base).rstrip("/")
    if provider == "openrouter" and base.endswith("/v1"):
        base = base[: -len("/v1")]  # an OpenAI-style ".../api/v1" base: the decisions API lives at ".../api"
    all_headers = httpx.Headers(
        {
            "Authorization": f"Bearer {key.strip()}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": _user_agent(),
        }
    )
    all_headers.update(headers or {})
    return Endpoint(
        provider=provider,
        url=base + path,
        key_env=key_env,
        api_key=key.strip(),
        headers=all_headers,
        http_url=httpx.URL(base + path),
    )


def resolve_model(provider: Provider, model: str) -> str:
    """Map OpenRouter ids (``~typesafe/jev-latest``) to TypeSafe's bare ids (``jev-latest``) for TypeSafe direct."""
    if not isinstance(model, str) or not model.strip():
        raise UserError(f"`model` must be a model id such as {DEFAULT_MODEL!r}, got {model!r}.")
    if provider == "typesafe":
        for prefix in ("~typesafe/", "typesafe/"):
            if model.startswith(prefix):
                return model[len(prefix) :]
    return model


def check_timeout(timeout: float | None) -> float:
    """Return the timeout to use (the default for ``None``); raise `UserError` for a non-positive one."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise UserError(f"`timeout` must be a positive number of seconds or None, got {timeout!r}.")
    return float(timeout)


@dataclasses.dataclass(frozen=True)
class Plan:
    """The checked questions of one request and what their answers must look like."""

    questions: dict[str, dict[str, Any]]
    """Question id -> wire dict (choice labels possibly replaced by safe keys)."""
    label_maps: dict[str, dict[str, str]]
    """Choice question id -> {wire key: label}, only for questions whose labels needed safe keys."""
    form: type[Questions] | None = None


_PLANS: weakref.WeakKeyDictionary[type[Questions], dict[str, Plan]] = weakref.WeakKeyDictionary()


def plan_questions(questions: Any, provider: Provider = "openrouter") -> Plan:
    """Check the questions (a mapping or a `Questions` subclass) before anything is sent.

    Raises:
        UserError: naming the question and what is wrong with it.
    """
    if isinstance(questions, type) and issubclass(questions, Questions):
        cached = _PLANS.setdefault(questions, {})
        if provider not in cached:
            if not questions.__jev_wire__:
                raise UserError(
                    f"{questions.__name__} declares no questions. Add fields like `x: NoulAnswer = noul(...)`."
                )
            cached[provider] = _make_plan(questions.__jev_wire__, questions)
        return cached[provider]
    if not isinstance(questions, Mapping):
        raise UserError(
            f"`questions` must be a dict of name -> question or a Questions subclass, got {type(questions).__name__}."
        )
    if not questions:
        raise UserError("`questions` is empty. Ask at least one question.")
    wire: dict[str, dict[str, Any]] = {}
    for name, question in questions.items():
        if not isinstance(name, str) or not name:
            raise UserError(f"Question names must be non-empty strings, got {name!r}.")
        wire[name] = wire_question(name, question, provider=provider)
    return _make_plan(wire, None)


def _make_plan(wire: dict[str, dict[str, Any]], form: type[Questions] | None) -> Plan:
    label_maps: dict[str, dict[str, str]] = {}
    questions = wire
    for name, question in wire.items():
        if question["type"] != "choice":
            continue
        mapping = safe_label_keys(list(question["criteria"]))
        if mapping is not None:
            label_maps[name] = mapping
            if questions is wire:
                questions = dict(wire)
            keys = {label: key for key, label in mapping.items()}
            criteria = {keys[label]: text for label, text in question["criteria"].items()}
            questions[name] = {**question, "criteria": criteria}
    return Plan(questions=questions, label_maps=label_maps, form=form)


def encode_body(plan: Plan, state: Any, model: str) -> bytes:
    """Serialise the request body; LangChain messages in ``state`` become OpenAI-style message dicts.

    Raises:
        UserError: when ``state`` is not JSON (after message conversion) or the request is too large.
    """
    if state is None or isinstance(state, bool | int | float | bytes | bytearray):
        raise UserError(
            f"`state` must be a string, a JSON object or array, or LangChain messages, got {type(state).__name__}."
        )
    body = {"model": model, "state": state, "questions": plan.questions}
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=_json_default, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UserError(
            f"`state` cannot be sent as JSON: {exc}. Pass strings, numbers, lists, dicts or messages."
        ) from exc
    data = text.encode()
    tokens = math.ceil(len(data) / 4) + REQUEST_OVERHEAD_TOKENS
    if tokens > MAX_REQUEST_TOKENS:
        raise UserError(
            f"The request is about {tokens} tokens; Jev accepts at most {MAX_REQUEST_TOKENS}. "
            "Shorten `state` or send fewer questions."
        )
    return data


def _json_default(value: Any) -> Any:
    messages = sys.modules.get("langchain_core.messages")
    if messages is not None and isinstance(value, messages.BaseMessage):
        return messages.convert_to_openai_messages(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    raise TypeError(f"a {type(value).__name__} is not JSON serializable")


def build_request(endpoint: Endpoint, plan: Plan, state: Any, *, model: str) -> httpx.Request:
    """Build the POST request (sans-IO: nothing is sent)."""
    content = encode_body(plan, state, resolve_model(endpoint.provider, model))
    return httpx.Request("POST", endpoint.http_url, headers=endpoint.headers, content=content)


def _answer_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    return kind if kind in ("choice", "noul", "score") else "other"


# One pydantic pass validates the whole reply; answer types we do not know stay plain dicts.
_WireAnswer = Annotated[
    Annotated[ChoiceAnswer, Tag("choice")]  # type: ignore[type-arg]  # bare: reprs read `ChoiceAnswer(...)`
    | Annotated[NoulAnswer, Tag("noul")]
    | Annotated[ScoreAnswer, Tag("score")]
    | Annotated[dict[str, Any], Tag("other")],
    Discriminator(_answer_tag),
]
_ANSWER_CLASSES: dict[str, type[BaseModel]] = {"choice": ChoiceAnswer, "noul": NoulAnswer, "score": ScoreAnswer}


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    answers: dict[str, _WireAnswer]
    usage: Usage = Usage()
    id: str | None = None
    provider: str | None = None


def parse_response(plan: Plan, response: httpx.Response) -> ClassifyResult[Any]:
    """Parse a 2xx reply and check it answers exactly what was asked.

    Raises:
        JevResponseError: for a body that is not the documented JSON, or a missing / mistyped answer.
    """
    try:
        reply = _Reply.model_validate_json(response.content)
    except ValidationError as exc:
        raise _response_error(response, f"the reply is not the documented JSON ({_first_error(exc)})") from exc
    answers: dict[str, Any] = {}
    for name, question in plan.questions.items():
        answer = reply.answers.get(name)
        if answer is None:
            raise _response_error(response, f"the reply has no answer for question {name!r}")
        kind = question["type"]
        if not isinstance(answer, _ANSWER_CLASSES[kind]):
            got = answer.get("type") if isinstance(answer, dict) else answer.type
            raise _response_error(response, f"question {name!r} is a {kind} but the answer is a {got!r}")
        try:
            answers[name] = _check_answer(plan, name, question, answer)
        except ValueError as exc:
            raise _response_error(response, f"the answer to {name!r} is invalid ({_first_error(exc)})") from exc
    result_answers: Any = answers
    if plan.form is not None:
        result_answers = object.__new__(plan.form)
        result_answers.__dict__.update(answers)
    return ClassifyResult(
        answers=result_answers,
        model=reply.model,
        usage=reply.usage,
        id=reply.id or response.headers.get("x-typesafe-request-id"),
        provider=reply.provider,
    )


def _check_answer(plan: Plan, name: str, question: dict[str, Any], answer: Any) -> Any:
    kind = question["type"]
    if kind == "noul":
        return answer
    if kind == "score":
        if set(answer.probabilities) != set(range(len(question["criteria"]))):
            raise ValueError(
                f"probabilities for levels {sorted(answer.probabilities)}, not 0..{len(question['criteria']) - 1}"
            )
        return answer
    choice: ChoiceAnswer[str] = answer
    labels = question["criteria"]
    if set(choice.probabilities) != set(labels) or choice.choice not in labels:
        raise ValueError(f"labels {sorted(choice.probabilities)} / choice {choice.choice!r}, not {sorted(labels)}")
    mapping = plan.label_maps.get(name)
    if mapping is None:
        return choice
    return ChoiceAnswer.model_construct(
        type="choice",
        choice=mapping[choice.choice],
        probabilities={mapping[key]: p for key, p in choice.probabilities.items()},
        confidence=choice.confidence,
    )


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return f"{where}: {error['msg']}" if where else error["msg"]
    return str(exc)


def _response_error(response: httpx.Response, what: str) -> JevResponseError:
    return JevResponseError(
        f"Jev answered {response.status_code} but {what}. The provider may have changed its reply format; "
        "check `base_url` and report it if it persists.",
        status=response.status_code,
        body=body_of(response),
        request_id=response.headers.get("x-typesafe-request-id"),
    )


@dataclasses.dataclass(frozen=True)
class Send:
    """Send ``request`` and report the `httpx.Response` (or the `httpx.TransportError`, or `TIMED_OUT`)."""

    request: httpx.Request
    timeout: float


@dataclasses.dataclass(frozen=True)
class Sleep:
    """Wait ``seconds``, then report ``None``."""

    seconds: float


TIMED_OUT: Final = "timed out"
Outcome = httpx.Response | Exception | Literal["timed out"] | None


def exchange(
    plan: Plan,
    request: httpx.Request,
    *,
    timeout: float,
    max_retries: int,
    max_retry_wait: float,
    key_env: str,
    clock: Callable[[], float] = time.monotonic,
) -> Generator[Send | Sleep, Outcome, ClassifyResult[Any]]:
    """Run one classify call as a sans-IO state machine; the shells do the sending and sleeping."""
    deadline = clock() + timeout
    attempt = 0
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            raise timeout_error(timeout)
        outcome = yield Send(request, remaining)
        error: Exception
        if isinstance(outcome, httpx.Response):
            if outcome.is_success:
                return parse_response(plan, outcome)
            error = api_error(outcome, key_env=key_env, attempts=attempt + 1)
            delay = retry_delay(outcome, attempt, max_retries=max_retries, max_retry_wait=max_retry_wait)
        elif outcome == TIMED_OUT or isinstance(outcome, httpx.TimeoutException):
            raise timeout_error(timeout) from (outcome if isinstance(outcome, Exception) else None)
        else:
            error = JevConnectionError(
                f"Could not reach Jev at {request.url} ({type(outcome).__name__}: {outcome}). "
                "Check `base_url` and the network."
            )
            error.__cause__ = outcome if isinstance(outcome, Exception) else None
            delay = backoff(attempt, max_retry_wait) if attempt < max_retries else None
        if delay is None or clock() + delay >= deadline:
            raise error
        yield Sleep(delay)
        attempt += 1


def request_timeout(seconds: float) -> dict[str, float]:
    """The httpx timeout extension for one attempt (every phase bounded by what is left of the deadline)."""
    return {"connect": seconds, "read": seconds, "write": seconds, "pool": seconds}
