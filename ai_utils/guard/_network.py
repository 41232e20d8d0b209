"""Private-network destinations in tool arguments: literal hosts, URLs and IP addresses in any encoding.

Parsed with `urllib.parse` and `ipaddress`, never resolved (no DNS): a deployment must still enforce egress after
resolution, or a public name that resolves to a private address gets through.

Caught: loopback, private, link-local, shared (100.64/10), reserved, multicast and unspecified addresses; IPv4 in
dotted, decimal (``2130706433``), hex (``0x7f000001``, ``0x7f.0.0.1``), octal (``0177.0.0.1``) and shorthand
(``127.1``) forms; IPv6 in every form ``ipaddress`` reads (``[::1]``, zone ids, IPv4-mapped ``::ffff:127.0.0.1``,
IPv4-compatible, 6to4 and NAT64 addresses with a private IPv4 inside); cloud metadata endpoints
(``169.254.169.254``, ``fd00:ec2::254``, ``metadata.google.internal``); ``localhost``-like and internal names
(``localhost``, ``*.localhost``, ``*.local``, ``*.internal``, ``*.home.arpa``, ...), also percent-encoded or in
full-width Unicode.

Numeric shorthand (``127.1``, ``2130706433``) is read as an address only where a destination is expected (a URL's
host, or a whole value under a key like ``url``/``host``/``address``, also a ``--host=...``/``url=...`` token), so
"version 10.5" or "42" in prose stays text; dotted quads, hex forms and IPv6 are caught anywhere.

Text is read the way the HTTP client will parse it: NFKC-normalised, with the ideographic, full-width and half-width
full stops (``。``, ``．``, ``｡``) as dots (httpx's IDNA encoding turns them into ``.``), invisible format characters
dropped, backslashes as slashes; URLs are found anywhere in a token (``--url=http://127.0.0.1/``), the value of
every ``key=value`` token is checked, and keys and values are read at every depth (`ai_utils.guard._walk` bounds the
walk first: a value too big or deep to read whole never reaches this module unchecked).
"""

from __future__ import annotations

import functools
import ipaddress
import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["private_destinations"]

_LOCAL_NAMES = frozenset(
    {
        "localhost",
        "localhost.localdomain",
        "ip6-localhost",
        "ip6-loopback",
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "kubernetes.default",
        "kubernetes.default.svc",
    }
)
_LOCAL_SUFFIXES = (".localhost", ".local", ".localdomain", ".internal", ".home.arpa", ".lan", ".intranet", ".corp")
_METADATA_IPS = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_V4_COMPAT = ipaddress.ip_network("::/96")
_DEST_WORDS = frozenset(
    {
        "url", "urls", "uri", "host", "hostname", "endpoint", "address", "addr", "domain", "server", "ip",
        "target", "link", "href", "webhook", "proxy", "origin", "dest", "destination", "site", "base",
    }
)  # fmt: skip
_TOKEN_SPLIT = re.compile(r"[\s'\"<>`|;,(){}]+")
# Where a URL starts anywhere in a token (a scheme, or none, then ``//``); URLs nested in a URL's query count too.
_URL_START = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.\-]*:)?//")
# Full stops the IDNA encoding of an HTTP client reads as ``.`` (after NFKC, which maps U+FF0E and U+FF61).
_DIGIT = re.compile(r"[0-9]")
# Text with none of these holds no destination we catch (no address, no local or metadata name): skipped at once.
_MAYBE = re.compile(r"[0-9:%]|local|metadata|internal|instance-data|kubernetes|arpa|lan|intranet|corp|ip6-", re.I)
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
_NUMERIC_QUAD = re.compile(r"(?:0x[0-9a-f]+|\d+)(?:\.(?:0x[0-9a-f]+|\d+)){3}|0x[0-9a-f]{1,8}")
_WORDS = re.compile(r"[a-z]+|[A-Z][a-z]*|[A-Z]+(?![a-z])")


def _loose_ipv4(text: str) -> ipaddress.IPv4Address | None:
    """``inet_aton`` semantics: 1-4 parts, each decimal, ``0x`` hex or ``0``-octal; the last fills the rest."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        try:
            if part[:2] in ("0x", "0X"):
                values.append(int(part[2:], 16))
            elif len(part) > 1 and part[0] == "0":
                values.append(int(part[1:], 8))
            elif part.isdigit():
                values.append(int(part))
            else:
                return None
        except ValueError:
            return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        return None
    number = last
    for index, value in enumerate(head):
        number += value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _V4_COMPAT and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _ip_kind(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if ip in _METADATA_IPS:
        return "metadata"
    if isinstance(ip, ipaddress.IPv6Address) and (inner := _embedded_v4(ip)) is not None:
        return _ip_kind(inner)
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link_local"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_multicast:
        return "multicast"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "reserved"
    return None


def normalize(text: str) -> str:
    """``text`` as an HTTP client reads a destination in it: NFKC, IDNA full stops as dots, no format characters."""
    if text.isascii():
        return text.replace("\\", "/")
    text = unicodedata.normalize("NFKC", text).translate(_DOTS)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return text.replace("\\", "/")


def _host_kind(host: str, *, loose: bool) -> str | None:
    name = normalize(unquote(host)).casefold().strip().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    name = name.split("%", 1)[0]  # IPv6 zone id
    if not name:
        return None
    if name in _LOCAL_NAMES or name.endswith(_LOCAL_SUFFIXES):
        return "metadata" if name.startswith(("metadata", "instance-data")) else "localhost"
    if ":" not in name and _DIGIT.search(name) is None:
        return None  # no address has neither a digit nor a colon (and parsing one that fails is costly)
    try:
        return _ip_kind(ipaddress.ip_address(name))
    except ValueError:
        pass
    if loose or _NUMERIC_QUAD.fullmatch(name):
        ip = _loose_ipv4(name)
        return _ip_kind(ip) if ip is not None else None
    return None


def _token_host(token: str) -> str:
    """The host part of ``user@host:port/path`` (IPv6 in brackets kept whole)."""
    token = token.split("/", 1)[0].rsplit("@", 1)[-1]
    if token.startswith("["):
        return token.split("]", 1)[0] + "]"
    if token.count(":") == 1:
        return token.split(":", 1)[0]
    return token


def _url_kinds(token: str) -> Iterator[str]:
    for match in _URL_START.finditer(token):
        try:
            host = urlsplit(token[match.start() :]).hostname
        except ValueError:
            host = None
        kind = _host_kind(host, loose=True) if host else None
        if kind is not None:
            yield kind


def _string_kinds(value: str, *, destination: bool) -> Iterator[str]:
    value = normalize(value)
    if _MAYBE.search(value) is None:
        return
    stripped = value.strip()
    whole = destination and bool(stripped) and not any(c.isspace() for c in stripped)
    for raw in _TOKEN_SPLIT.split(value):
        token = raw.strip(".:!?")
        if not token:
            continue
        if "//" in token:
            yield from _url_kinds(token)  # a URL's own query parameters are not destinations (nested URLs are)
            continue
        candidates = [(token, whole)]
        if "=" in token:
            # ``host=10.0.0.1``, ``--host=2130706433``: the value of a ``key=value`` token is a candidate too, read
            # loosely (numeric shorthand) under a destination key.
            key, *values = token.split("=")
            loose = _is_destination_key(key.lstrip("-"))
            candidates.extend((v.strip(".:!?"), loose) for v in values if v)
        for candidate, loose in candidates:
            kind = _host_kind(_token_host(candidate), loose=loose)
            if kind is not None:
                yield kind


def _is_destination_key(key: object) -> bool:
    return isinstance(key, str) and _destination_word(key)


@functools.lru_cache(maxsize=4096)  # argument names repeat call after call
def _destination_word(key: str) -> bool:
    return any(w.lower() in _DEST_WORDS for w in _WORDS.findall(key))


def _strings(value: Any) -> list[tuple[str, bool]]:
    """Every key and leaf of ``value`` as text, with whether a destination is expected there, in order.

    Numbers under a destination key count too: a tool may build ``f"http://{host}/"`` from one. `check_bounds`
    ran first, so the walk (a loop, not recursion) is bounded.
    """
    out: list[tuple[str, bool]] = []
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, destination = stack.pop()
        if isinstance(item, str):
            out.append((item, destination))
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int | float):
            if destination:
                out.append((str(item), True))
        elif isinstance(item, Mapping):
            children: list[tuple[Any, bool]] = []
            for key, child in item.items():
                if isinstance(key, str):
                    children.append((key, False))
                children.append((child, destination or _is_destination_key(key)))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend((child, destination) for child in reversed(list(item)))
    return out


def private_destinations(args: Mapping[str, Any]) -> list[str]:
    """The kinds of private-network destination literally present in a tool call's arguments.

    Reads every key and value at every depth; bound the value with `ai_utils.guard._walk.check_bounds` first.

    Args:
        args: the tool call's arguments.

    Returns:
        Distinct kinds in order of appearance (``"loopback"``, ``"private"``, ``"link_local"``, ``"metadata"``,
        ``"localhost"``, ``"reserved"``, ``"multicast"``, ``"unspecified"``); empty when none.
    """
    found: dict[str, None] = {}
    for text, destination in _strings(args):
        for kind in _string_kinds(text, destination=destination):
            found.setdefault(kind)
    return list(found)
