"""Request pieces every ASGI route of ours shares: bounded body, JSON depth, origin, ``authenticate`` -> `Actor`.

The feedback route (``gateway/feedback``) and the HTTP edge (``ai_utils.server``) both use them, so a body
is read, a nesting bomb refused and an actor resolved the same way everywhere. Framework-free: they read
only ``request.headers``, ``request.url`` and ``request.stream()`` (Starlette's request interface).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ai_utils.gateway.actor import Actor, to_actor

__all__ = ["actor_of", "cross_origin", "maybe_await", "read_limited", "too_deep"]


async def maybe_await(value: Any) -> Any:
    """``value``, awaited first when it is awaitable (a sync or async callback's result)."""
    return await value if inspect.isawaitable(value) else value


async def read_limited(request: Any, limit: int) -> bytes | None:
    """The body, or ``None`` once it passes ``limit`` bytes (a declared larger ``Content-Length`` reads nothing).

    Never more than ``limit`` bytes are held: the body is read chunk by chunk, unlike ``await request.body()``.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def too_deep(value: Any, max_depth: int) -> bool:
    """Whether ``value`` nests lists/objects deeper than ``max_depth`` (iterative: no recursion limit)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _origin(url: str) -> tuple[str, str] | None:
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme.lower(), f"{(parts.hostname or '').lower()}:{port}"


def _trusted_site(site_url: str | Callable[[], str | None] | None) -> str | None:
    value = site_url() if callable(site_url) else site_url
    if value:
        return value
    for name in ("NEXT_PUBLIC_SITE_URL", "SITE_URL", "DOMAIN_URL"):
        if os.environ.get(name):
            return os.environ[name]
    return None


def cross_origin(request: Any, site_url: str | Callable[[], str | None] | None) -> bool:
    """Whether a browser sent the request from another origin (``Origin``, else ``Referer``) than the trusted site."""
    sent = request.headers.get("origin") or request.headers.get("referer")
    if not sent:
        return False  # not a browser form post (curl, server-to-server): nothing to forge
    trusted = _trusted_site(site_url) or f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"
    return _origin(sent) != _origin(trusted)


def actor_of(auth: Any) -> Actor | None:
    """The `Actor` an ``authenticate`` callback answered, or ``None`` for no one.

    Accepted: an `Actor`, ``{"actor": ...}`` (the seed's form), an actor mapping, or ``None``; an actor without
    ``user_id`` counts as no one.

    Raises:
        UserError: the answer is none of those forms.
    """
    if isinstance(auth, Mapping) and "actor" in auth:
        auth = auth["actor"]
    actor = to_actor(auth)
    return actor if actor is not None and actor.user_id else None
