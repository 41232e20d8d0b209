"""The secret shapes guardrails and tool errors redact: a small vetted pattern table, one pass per shape present.

Why not a detector library: `detect-secrets` (the maintained, light option) scans line by line without match
spans, keeps global plugin settings, flags high-entropy strings (noisy in prose) and has no shape for modern
``sk-proj-``/``sk-or-`` keys or bearer tokens. The shapes below follow the gitleaks / detect-secrets rules for the
same providers, loosened only where a provider's length varies.

Each shape has literal anchors: the regex runs only on text that contains one, so clean text costs a few substring
checks (C speed), not a regex scan per shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SECRET_KINDS", "redact_secrets"]


@dataclass(frozen=True, slots=True)
class _Shape:
    kind: str
    anchors: tuple[str, ...]
    pattern: re.Pattern[str]
    group: int = 0  # 0: redact the whole match; else only this group (keeps e.g. the word "Bearer")
    needs_digit: bool = False  # a match without a digit is prose ("sk-learn-compatible-..."), kept as is


# Every repeat is bounded: a failing match then costs O(bound) per start, never O(text) (no quadratic scans).
_KEY_TAIL = r"[A-Za-z0-9_\-]{20,256}"
_NOT_AFTER_WORD = r"(?<![A-Za-z0-9])"

# Order matters: specific shapes first, so ``Bearer eyJ...`` is a JWT and ``sk-or-...`` is not an OpenAI key;
# a redacted span ("[REDACTED:...]") never matches a later shape.
_SHAPES: tuple[_Shape, ...] = (
    _Shape(
        "private_key",
        ("PRIVATE KEY",),
        re.compile(
            r"-----BEGIN[ A-Z0-9]{0,32}PRIVATE KEY(?: BLOCK)?-----"
            # Bounded body (an RSA-8192 key is ~6.5k chars): many BEGIN lines without END stay linear.
            r"(?:[\s\S]{0,16384}?-----END[ A-Z0-9]{0,32}PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,\-]{0,16384})"
        ),
    ),
    _Shape(
        "jwt", ("eyJ",), re.compile(r"\beyJ[A-Za-z0-9_\-]{5,2048}+\.ey[A-Za-z0-9_\-]{5,8192}+\.[A-Za-z0-9_\-]{0,1024}+")
    ),
    _Shape("anthropic_api_key", ("sk-ant-",), re.compile(_NOT_AFTER_WORD + r"sk-ant-" + _KEY_TAIL)),
    _Shape("openrouter_api_key", ("sk-or-",), re.compile(_NOT_AFTER_WORD + r"sk-or-" + _KEY_TAIL)),
    # OpenAI: legacy ``sk-`` + 48, ``sk-proj-``/``sk-svcacct-``/``sk-admin-`` + ~150; a digit keeps
    # hyphenated words ("sk-learn-compatible-...") out. Possessive: a run is consumed once, never rescanned.
    _Shape("openai_api_key", ("sk-",), re.compile(_NOT_AFTER_WORD + r"sk-" + _KEY_TAIL + "+"), needs_digit=True),
    _Shape(
        "aws_access_key",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])"),
    ),
    _Shape(
        "aws_secret_key",
        ("secret_access_key", "SECRET_ACCESS_KEY", "SecretAccessKey", "secretAccessKey"),
        re.compile(
            r"(?i:aws_?secret_?access_?key|secret_?access_?key)[\"']?\s{0,8}[:=]\s{0,8}[\"']?"
            r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        group=1,
    ),
    _Shape(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{22,255})"),
    ),
    _Shape("slack_token", ("xox",), re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9\-]{10,512}")),
    _Shape("google_api_key", ("AIza",), re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}")),
    _Shape(
        "stripe_key", ("_live_", "_test_"), re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,512}")
    ),
    _Shape(
        "bearer_token",
        ("earer", "EARER"),
        re.compile(r"(?i:\bbearer)\s{1,8}([A-Za-z0-9\-._~+/]{16,8192}={0,2})"),
        group=1,
    ),
)

SECRET_KINDS: tuple[str, ...] = tuple(shape.kind for shape in _SHAPES)
"""Every ``<kind>`` that can appear in ``[REDACTED:<kind>]``, in detection order."""

# Every anchor of every shape in one alternation: clean text costs one C-level search, not a check per anchor.
_ANY_ANCHOR = re.compile("|".join(re.escape(anchor) for shape in _SHAPES for anchor in shape.anchors))


def _replace(shape: _Shape, text: str) -> tuple[str, int]:
    count = 0
    mark = f"[REDACTED:{shape.kind}]"

    def sub(match: re.Match[str]) -> str:
        nonlocal count
        value = match.group(0)
        if shape.needs_digit and not any(c.isdigit() for c in value):
            return value
        count += 1
        if not shape.group:
            return mark
        start, end = match.span(shape.group)
        whole_start = match.start()
        return value[: start - whole_start] + mark + value[end - whole_start :]

    return shape.pattern.sub(sub, text), count


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``, and the kinds found (in table order).

    Args:
        text: any text.

    Returns:
        ``(redacted, kinds)``; ``kinds`` is empty (and the text unchanged) when nothing was found.
    """
    kinds: list[str] = []
    if _ANY_ANCHOR.search(text) is None:
        return text, kinds
    for shape in _SHAPES:
        if not any(anchor in text for anchor in shape.anchors):
            continue
        if shape.group or shape.needs_digit:
            text, count = _replace(shape, text)
        else:
            text, count = shape.pattern.subn(f"[REDACTED:{shape.kind}]", text)
        if count:
            kinds.append(shape.kind)
    return text, kinds
