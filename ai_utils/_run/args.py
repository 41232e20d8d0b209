"""Constructor and call arguments shared by the wrappers (`Agent`, `DeepAgent`, `JevToolCaller`): checked once, here.

Each check turns a natural mistake (a typo'd keyword, ``llm=get_llm`` instead of ``get_llm()``, ``tools=None``)
into a `UserError` naming the value and the fix, before anything is built.
"""

from __future__ import annotations

import difflib
import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import DEFAULT_RECURSION_LIMIT, merge_configs

from ai_utils.exceptions import UserError

if TYPE_CHECKING:
    from ai_utils.tools._mcp_config import MCPServer

__all__ = [
    "check_approval_saver",
    "check_prompt",
    "check_store",
    "config_thread_id",
    "keyword_names",
    "mcp_servers",
    "merge_run_config",
    "reject_unknown",
    "resolve_llm",
    "tool_list",
    "warn_unstored_thread",
]


def resolve_llm(llm: Any, *, owner: str) -> BaseChatModel:
    """A chat model object: ``None`` is `get_llm()`, ``"provider:model"`` is ``get_llm(provider, model)``.

    deepagents would resolve a string itself, with provider profiles that add their own headers and
    routing (its OpenRouter profile excludes providers), so strings go through our factory instead.
    """
    if isinstance(llm, BaseChatModel):
        return llm
    if llm is not None and not isinstance(llm, str):
        hint = " Call it: `llm=get_llm()`." if callable(llm) else ""
        raise UserError(
            f"{owner}(llm=...) must be a LangChain chat model or a 'provider:model' string, got {llm!r}.{hint}"
        )
    from ai_utils.llm import get_llm

    if llm is None:
        return get_llm()
    provider, _, model = llm.partition(":")
    return get_llm(provider, model or None)


def check_prompt(prompt: Any, *, owner: str) -> str | None:
    """``prompt`` as one str: a str, ``None``, or a list of str joined with blank lines (the seed's ``string[]``)."""
    if prompt is None or isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list | tuple) and all(isinstance(part, str) for part in prompt):
        return "\n\n".join(part for part in prompt if part.strip()) or None
    raise UserError(
        f"{owner}(prompt=...) must be a str or a list of str (the system prompt, parts joined with blank lines), "
        f"got {prompt!r}."
    )


def check_store(store: Any, *, owner: str) -> Any:
    """``store`` if it is ``None`` or a LangGraph `BaseStore` (memory across threads), else `UserError`."""
    from langgraph.store.base import BaseStore

    if store is not None and not isinstance(store, BaseStore):
        raise UserError(
            f"{owner}(store=...) must be a LangGraph BaseStore (InMemoryStore, PostgresStore, SqliteStore), got "
            f"{store!r}."
        )
    return store


def tool_list(tools: Any, *, owner: str) -> Sequence[Any]:
    """The tools to normalise: a `ToolRegistry` gives all its tools; ``None`` is refused."""
    if tools is None:
        raise UserError(f"{owner}(tools=None): pass a list of tools, or leave `tools` out for an agent without tools.")
    all_tools = getattr(tools, "all_tools", None)
    if all_tools is not None and not isinstance(tools, Iterable):
        return list(all_tools)
    return tools  # type: ignore[no-any-return]


MODEL_HINT = " Model options such as temperature go to the model: `llm=get_llm(temperature=0.2)`."


def keyword_names(function: Callable[..., Any]) -> list[str]:
    """The keyword-only parameter names of ``function`` (a wrapper's explicit constructor)."""
    params = inspect.signature(function).parameters.values()
    return [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]


def reject_unknown(unknown: Iterable[str], *, owner: str, known: Iterable[str], hint: str = MODEL_HINT) -> None:
    """Raise `UserError` for keyword arguments not in ``known``, suggesting the closest."""
    unknown = list(unknown)
    if not unknown:
        return
    names = sorted(known)
    parts = []
    for key in unknown:
        close = difflib.get_close_matches(key, names, n=1)
        parts.append(f"{key}= (did you mean {close[0]}=?)" if close else f"{key}=")
    known_text = f" Known: {', '.join(names)}." if names else ""  # a Chain takes none: no empty "Known: ."
    raise UserError(f"{owner} got unknown argument(s) {', '.join(parts)}.{known_text}{hint}")


def merge_run_config(ours: RunnableConfig, config: RunnableConfig | None) -> RunnableConfig:
    """Merge a caller's LangChain ``config`` into ours.

    Tags, metadata, callbacks and ``configurable`` extras are combined; the caller's ``run_name``,
    ``recursion_limit`` and other keys win; our ``thread_id`` (the ``thread_id=`` argument) wins over one in
    ``config["configurable"]``. A ``recursion_limit`` of LangChain's default (25) counts as unset: every config
    that passed through a `Runnable` (``prompt | agent``, ``with_retry``, ``batch``) carries it, and it would cut
    an agent short after about 12 tool rounds.
    """
    if not config:
        return ours
    check_run_config(config)
    if config.get("recursion_limit") == DEFAULT_RECURSION_LIMIT:
        config = cast("RunnableConfig", {k: v for k, v in config.items() if k != "recursion_limit"})
    merged = merge_configs(ours, config)
    thread_id = (ours.get("configurable") or {}).get("thread_id")
    if thread_id is not None:
        merged["configurable"] = {**(merged.get("configurable") or {}), "thread_id": thread_id}
    return merged


def check_run_config(config: Any, owner: str = "") -> None:
    """`UserError` unless ``config`` is a mapping (LangChain's ``RunnableConfig``).

    A str here is usually a thread id passed where ``invoke(input, config=None, **options)`` takes the config.
    """
    if isinstance(config, Mapping):
        return
    where = f"{owner}: " if owner else ""
    hint = f" To name the thread, pass `thread_id={config!r}`." if isinstance(config, str) else ""
    raise UserError(
        f"{where}`config` must be a LangChain RunnableConfig mapping (e.g. {{'configurable': {{'thread_id': 't-1'}}, "
        f"'tags': [...]}}), got a {type(config).__name__}.{hint}"
    )


def config_thread_id(thread_id: str | None, config: RunnableConfig | None, *, owner: str = "") -> str | None:
    """``thread_id``, else the one in ``config["configurable"]`` (LangChain's way of naming the thread).

    Raises:
        UserError: both name a thread and they differ (which one was meant would be a guess).
    """
    if config is None:
        return thread_id
    check_run_config(config, owner)
    value = (config.get("configurable") or {}).get("thread_id")
    if value is None:
        return thread_id
    if thread_id is None:
        return str(value)
    if str(value) != str(thread_id):
        where = f"{owner}: " if owner else ""
        raise UserError(
            f"{where}`thread_id={thread_id!r}` and `config['configurable']['thread_id']={value!r}` name different "
            "threads; pass the thread once (as `thread_id=` or in the config), or the same id in both."
        )
    return thread_id


def warn_unstored_thread(owner: Any, thread_id: str | None) -> None:
    """Warn once per wrapper when a ``thread_id`` is passed to one without a checkpointer (nothing is kept)."""
    if thread_id is None or owner.checkpointer is not None or owner.__dict__.get("_warned_unstored"):
        return
    owner.__dict__["_warned_unstored"] = True
    warnings.warn(
        f"{type(owner).__name__} has no checkpointer, so thread_id={thread_id!r} keeps nothing: each call starts "
        "a new conversation. Pass `checkpointer=MemorySaver()` (or sqlite_saver(path)) to remember threads.",
        UserWarning,
        stacklevel=4,
    )


def mcp_servers(mcp_server: Any) -> tuple[MCPServer, ...]:
    """``mcp_server`` as `MCPServer`s (checked); with any, the ``mcp`` extra is imported now, not mid-run."""
    from ai_utils.tools._mcp_config import normalize_mcp_servers

    servers = normalize_mcp_servers(mcp_server)
    if servers:
        import ai_utils.tools.mcp  # noqa: F401  # fail at construction when the `mcp` extra is missing
    return servers


def check_approval_saver(interrupt_on: Any, checkpointer: Any, hint: str, *, pauses: str = "runs for approval") -> None:
    """`UserError` when ``interrupt_on`` is set without a checkpointer: a paused run could never resume."""
    if interrupt_on and checkpointer is None:
        raise UserError(f"`interrupt_on` pauses {pauses}, which needs a checkpointer to resume from. {hint}")
