"""The ``llm=`` backend of `classify()`: Jev-style answers from any chat model's label logprobs.

Recipe: `reference/jev-protocol.md` §6.3 (jevper's ``logprobs`` method, anyjev's prompt). One request
per question asks for a one-token label with ``logprobs`` / ``top_logprobs``; the first answer
token's alternatives are mapped to labels, and a softmax over the labels alone gives the
probabilities. The Jev fields then follow TypeSafe's formulas (reference §3): choice = argmax,
confidence ``(p_max - 1/K) / (1 - 1/K)``; noul = P(Yes); score = ``sum(i * p_i)`` with the
mode-MAD confidence; legend = the levels sent.

Labels are single ASCII characters or words that every common tokenizer encodes as one token and
that cannot collide: choice options are the letters ``A``..``Z`` (so at most 26 labels), score
levels the digits ``0``..``9`` (Jev's level numbers), noul ``Yes`` / ``No``. Tokens are compared
after stripping whitespace and ``*.:)("'`` and upper-casing, and variants of one label (``" A"``,
``"A"``, ``"a"``) add up.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ai_utils.exceptions import ModelOutputError, UserError
from ai_utils.jev import _logprob_http
from ai_utils.jev import _protocol as proto
from ai_utils.jev.questions import ChoiceAnswer, ClassifyResult, NoulAnswer, Questions, ScoreAnswer, Usage

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["TOP_LOGPROBS", "aclassify_with_llm", "classify_with_llm"]

TOP_LOGPROBS: Final = 20
"""Alternatives asked per token: OpenAI's and Ollama's cap."""
_LETTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NUMBER: Final = (int, float)
_STRIP: Final = " \t\r\n*.:)(\"'"
# max_tokens=1: only the first answer token is read; a longer reply would cost without informing.
_REQUEST: Final[Mapping[str, Any]] = {"logprobs": True, "top_logprobs": TOP_LOGPROBS, "max_tokens": 1}
_SYSTEM: Final = (
    "You are a decision function. Read the state, then answer the question about it. "
    "Reply with the answer label only (one letter, digit or word as asked), nothing else."
)


@dataclasses.dataclass(frozen=True, slots=True)
class _Form:
    """One question's part of its request, the same whatever the state: built once per question set."""

    name: str
    kind: str
    labels: tuple[Any, ...]
    """Choice labels, score levels 0..N-1, or ``(True, False)`` for a noul."""
    tokens: tuple[str, ...]
    """The normalised answer token of each label."""
    index: Mapping[str, int]
    """``tokens`` -> label position."""
    prompt: str
    """The user message after the state: the question, its options or levels, how to answer."""
    legend: dict[int, Any]
    """A score's levels (pydantic copies it into each answer); empty otherwise."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Ask:
    """One question as one request: its form and the messages sent."""

    form: _Form
    messages: list[BaseMessage]


def classify_with_llm(llm: BaseChatModel, state: Any, questions: Any) -> ClassifyResult[Any]:
    """Answer ``questions`` about ``state`` with ``llm``: one request per question, run in parallel threads.

    Plain OpenAI-compatible models take a direct HTTP transport (`ai_utils.jev._logprob_http`, which says why
    and what it preserves); every other model runs through its own ``batch``.
    """
    plan, asks = _plan(state, questions)
    inputs: list[Any] = [ask.messages for ask in asks]
    replies: list[Any] | None = _logprob_http.batch(llm, inputs, _REQUEST)
    if replies is None:
        replies = llm.bind(**_REQUEST).batch(inputs)
    return _result(llm, plan, asks, replies)


async def aclassify_with_llm(llm: BaseChatModel, state: Any, questions: Any) -> ClassifyResult[Any]:
    """Async `classify_with_llm`: the requests run concurrently on the event loop."""
    plan, asks = _plan(state, questions)
    inputs: list[Any] = [ask.messages for ask in asks]
    replies: list[Any] | None = await _logprob_http.abatch(llm, inputs, _REQUEST)
    if replies is None:
        replies = await llm.bind(**_REQUEST).abatch(inputs)
    return _result(llm, plan, asks, replies)


_FORMS_SIZE: Final = 128
_forms: dict[Any, tuple[proto.Plan, tuple[_Form, ...]]] = {}
"""Checked questions and their prompts by question set: a `Questions` class, or a snapshot of a dict's content."""


class _Unkeyed(Exception):
    """A question set whose content `_snapshot` cannot capture; it is checked on every call."""


def _snapshot(value: Any) -> Any:
    """A hashable copy of a question set made of plain JSON values, types included (``1``, ``1.0`` and ``True`` differ).

    Anything else (question objects, other mappings, sets) raises `_Unkeyed`: such sets are not cached.
    """
    kind = type(value)
    if kind is str:
        return value
    if kind is dict:
        if not all(type(key) is str for key in value):
            raise _Unkeyed
        return (dict, tuple((key, _snapshot(item)) for key, item in value.items()))
    if kind is list or kind is tuple:
        return (kind, tuple(_snapshot(item) for item in value))
    if kind is int or kind is float or kind is bool or value is None:
        return (kind, value)
    raise _Unkeyed


def _key(questions: Any) -> Any:
    if isinstance(questions, type):
        return questions if issubclass(questions, Questions) else None
    if type(questions) is not dict:
        return None
    try:
        return _snapshot(questions)
    except _Unkeyed:
        return None


def _plan(state: Any, questions: Any) -> tuple[proto.Plan, list[_Ask]]:
    """The checked questions and one request's messages per question.

    Checking the questions and writing their part of the prompt happen once per question set (a `Questions`
    class, or a dict of the same content and types); per call only the state is rendered. Errors come in the
    same order either way: the questions, then the state, then a choice with too many options.
    """
    key = _key(questions)
    cached = None if key is None else _forms.get(key)
    if cached is None:
        plan = proto.plan_questions(questions)
        rendered = _render_state(state)
        forms = tuple(_form(plan, name, question) for name, question in plan.questions.items())
        if key is not None:
            if len(_forms) >= _FORMS_SIZE:
                _forms.clear()
            _forms[key] = (plan, forms)
    else:
        plan, forms = cached
        rendered = _render_state(state)
    head = f"State:\n{rendered}\n\n"
    asks = [_Ask(form, [SystemMessage(_SYSTEM), HumanMessage(head + form.prompt)]) for form in forms]
    return plan, asks


def _render_state(state: Any) -> str:
    if isinstance(state, str):
        return state
    if state is None or isinstance(state, bool | int | float | bytes | bytearray):
        raise UserError(
            f"`state` must be a string, a JSON object or array, or LangChain messages, got {type(state).__name__}."
        )
    try:
        return json.dumps(state, ensure_ascii=False, indent=2, default=proto._json_default, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UserError(
            f"`state` cannot be shown as JSON: {exc}. Pass strings, numbers, lists, dicts or messages."
        ) from exc


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _form(plan: proto.Plan, name: str, question: dict[str, Any]) -> _Form:
    kind = question["type"]
    lines = [f"Question: {_text(question['instructions'])}"]
    criteria: Any = question.get("criteria")
    if kind == "choice":
        keys = list(criteria)
        if len(keys) > len(_LETTERS):
            raise UserError(
                f"Choice {name!r} has {len(keys)} labels; with llm= each option is one letter, so at most "
                f"{len(_LETTERS)}. Group the labels, split the question, or ask Jev (drop llm=)."
            )
        mapping = plan.label_maps.get(name) or {key: key for key in keys}
        options = [
            f"{letter}. {mapping[key]}" + ("" if criteria[key] is None else f": {_text(criteria[key])}")
            for letter, key in zip(_LETTERS, keys, strict=False)
        ]
        lines += ["Options:\n" + "\n".join(options), "Answer with the letter of one option only."]
        labels: tuple[Any, ...] = tuple(mapping[key] for key in keys)
        tokens = tuple(_LETTERS[: len(keys)])
        legend: dict[int, Any] = {}
    elif kind == "noul":
        if criteria:
            lines.append(f"Yes means: {_text(criteria.get('true'))}\nNo means: {_text(criteria.get('false'))}")
        lines.append("Answer Yes or No.")
        labels, tokens, legend = (True, False), ("YES", "NO"), {}
    else:
        levels = [f"{level}. {_text(text)}" for level, text in enumerate(criteria)]
        lines += ["Levels, lowest first:\n" + "\n".join(levels), "Answer with the level number only."]
        labels = tuple(range(len(criteria)))
        tokens = tuple(str(level) for level in labels)
        legend = dict(enumerate(criteria))
    index = {token: i for i, token in enumerate(tokens)}
    return _Form(name, kind, labels, tokens, index, "\n\n".join(lines), legend)


def _model_name(llm: BaseChatModel, reply: AIMessage | None = None) -> str:
    if reply is not None:
        for key in ("model_name", "model"):
            value = reply.response_metadata.get(key)
            if isinstance(value, str) and value:
                return value
    for attribute in ("model_name", "model"):
        value = getattr(llm, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(llm).__name__


def _first_token(llm: BaseChatModel, reply: AIMessage) -> Mapping[str, Any]:
    logprobs = reply.response_metadata.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else logprobs
    if not isinstance(content, Sequence) or not content:
        raise UserError(
            f"The chat model {_model_name(llm, reply)!r} returned no logprobs, so classify(..., llm=...) cannot "
            "read label probabilities. Use a model and server that support `logprobs`/`top_logprobs` on Chat "
            "Completions (OpenAI, vLLM, llama.cpp, recent Ollama, many OpenRouter providers; not reasoning "
            "models), or drop llm= to ask Jev."
        )
    for entry in content:
        if isinstance(entry, Mapping) and str(entry.get("token", "")).strip(_STRIP):
            return entry
    first: Mapping[str, Any] = content[0]
    return first


def _read(llm: BaseChatModel, ask: _Form, reply: AIMessage) -> list[float]:
    """The probability of each of ``ask``'s labels, renormalised over the labels."""
    entry = _first_token(llm, reply)
    alternatives = entry.get("top_logprobs") or []
    if len(alternatives) < 2:
        raise UserError(
            f"The chat model {_model_name(llm, reply)!r} returned logprobs without `top_logprobs` alternatives "
            f"(got {len(alternatives)}), so the labels' probabilities are unknown. Use a server that honours "
            "`top_logprobs`, or drop llm= to ask Jev."
        )
    index = ask.index
    per_label: list[list[float]] = [[] for _ in ask.tokens]
    seen: set[str] = set()  # a token listed twice counts once (its first, highest entry)
    for candidate in (entry, *alternatives):
        token, logprob = candidate.get("token"), candidate.get("logprob")
        if type(logprob) is not float and (not isinstance(logprob, _NUMBER) or isinstance(logprob, bool)):
            continue
        if not isinstance(token, str):
            continue
        if not -math.inf < logprob <= 1e-6:  # also false for NaN
            raise ModelOutputError(
                f"The chat model {_model_name(llm, reply)!r} sent the log-probability {logprob!r} for {token!r}; "
                "log-probabilities are finite and <= 0. The server's logprobs are broken; try another server or "
                "drop llm=.",
                errors=f"invalid logprob {logprob!r}",
                attempts=1,
                output=reply.text,
            )
        if token not in seen:
            seen.add(token)
            i = index.get(token.strip(_STRIP).upper())
            if i is not None:
                per_label[i].append(float(logprob))
    label_logprobs = [_logsumexp(values) for values in per_label]
    peak = max(label_logprobs)
    if peak == -math.inf:
        raise ModelOutputError(
            f"The chat model {_model_name(llm, reply)!r} answered question {ask.name!r} with {reply.text!r}; none of "
            f"its top {len(alternatives)} tokens is a label ({', '.join(ask.tokens)}). Reword the instructions, "
            "use a stronger model, or drop llm= to ask Jev.",
            errors="no label token among the top logprobs",
            attempts=1,
            output=reply.text,
        )
    weights = [math.exp(value - peak) for value in label_logprobs]
    total = sum(weights)
    return [weight / total for weight in weights]


def _logsumexp(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else -math.inf
    peak = max(values)
    if peak == -math.inf:
        return peak
    return peak + math.log(sum(math.exp(value - peak) for value in values))


def _answer(ask: _Form, p: list[float]) -> Any:
    if ask.kind == "noul":
        return NoulAnswer(noul=min(1.0, max(0.0, p[0])))
    best = max(range(len(p)), key=p.__getitem__)
    k = len(p)
    if ask.kind == "choice":
        confidence = 1.0 if k == 1 else (p[best] - 1 / k) / (1 - 1 / k)
        return ChoiceAnswer(
            choice=ask.labels[best],
            probabilities=dict(zip(ask.labels, p, strict=True)),
            confidence=_unit(confidence),
        )
    mad_uniform = sum(abs(i - (k - 1) / 2) for i in range(k)) / k
    spread = sum(p_i * abs(i - best) for i, p_i in enumerate(p))
    return ScoreAnswer(
        score=sum(i * p_i for i, p_i in enumerate(p)),
        legend=ask.legend,
        probabilities=dict(enumerate(p)),
        confidence=_unit(1 - spread / mad_uniform),
    )


def _unit(value: float) -> float:
    return min(1.0, max(0.0, value))


def _result(llm: BaseChatModel, plan: proto.Plan, asks: list[_Ask], replies: list[Any]) -> ClassifyResult[Any]:
    answers: dict[str, Any] = {}
    input_tokens = output_tokens = 0
    for ask, reply in zip(asks, replies, strict=True):
        if not isinstance(reply, AIMessage):
            raise ModelOutputError(
                f"The chat model {_model_name(llm)!r} returned a {type(reply).__name__}, not an AIMessage.",
                errors="not an AIMessage",
                attempts=1,
            )
        form = ask.form
        answers[form.name] = _answer(form, _read(llm, form, reply))
        if reply.usage_metadata:
            input_tokens += reply.usage_metadata.get("input_tokens", 0)
            output_tokens += reply.usage_metadata.get("output_tokens", 0)
    result_answers: Any = answers
    if plan.form is not None:
        result_answers = object.__new__(plan.form)
        result_answers.__dict__.update(answers)
    first: AIMessage = replies[0]
    provider = first.response_metadata.get("model_provider")
    return ClassifyResult(
        answers=result_answers,
        model=_model_name(llm, first),
        usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
        id=None,
        provider=provider if isinstance(provider, str) else None,
    )
