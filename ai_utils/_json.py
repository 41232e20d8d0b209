"""JSON text on the audit path: orjson where it is installed (it comes with langsmith), else the stdlib."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["RawJSON", "fast_json"]

try:
    import orjson
except ImportError:  # pragma: no cover - orjson comes with langsmith; the stdlib path is tested directly
    orjson = None  # type: ignore[assignment]


class RawJSON:
    """JSON text an encoder from `fast_json` embeds as is: serialize a part once, reuse it inside a larger value.

    The orjson path embeds it verbatim; on the stdlib path ``default`` must turn it back into data
    (``json.loads(raw.text)``), which gives the same text for text made by the same encoder.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def fast_json(
    stdlib: Callable[[Any], str],
    *,
    default: Callable[[Any], Any],
    sort_keys: bool = False,
    dates_via_default: bool = False,
) -> Callable[[Any], str]:
    """An encoder with ``stdlib``'s output for plain JSON data, several times faster through orjson.

    Args:
        stdlib: the stdlib encoder to match; it also takes what orjson refuses (integers beyond 64 bits,
            keys it cannot sort).
        default: turns values JSON cannot hold into ones it can (as ``stdlib`` does).
        sort_keys: sort object keys (``stdlib`` must sort too).
        dates_via_default: hand dates to ``default`` instead of orjson's ISO form.

    Returns:
        ``value -> str``.
    """
    if orjson is None:
        return stdlib
    option = orjson.OPT_NON_STR_KEYS
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    if dates_via_default:
        option |= orjson.OPT_PASSTHROUGH_DATETIME
    dumps = orjson.dumps
    fragment = orjson.Fragment

    def embed(value: Any) -> Any:
        return fragment(value.text) if type(value) is RawJSON else default(value)

    def encode(value: Any) -> str:
        try:
            return dumps(value, default=embed, option=option).decode()
        except TypeError:
            return stdlib(value)

    return encode
