"""Every private dependency name ai_utils relies on, checked in one place (the adapters in `ai_utils._compat`).

When an upgrade moves one of them, the failure here names the dependency, its installed version and the
adapter to update, instead of a confusing error deep inside a run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import anyio
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.prebuilt.tool_node import ToolRuntime

from ai_utils.testing import FakeChatModel


def _fail(distribution: str, what: str, adapter: str) -> None:
    pytest.fail(f"{distribution} {version(distribution)} moved {what}; update {adapter}", pytrace=False)


def _adapter(distribution: str, module: str) -> Any:
    """Import an adapter; one whose private import broke fails naming the dependency and its version."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        _fail(distribution, f"a name {module} imports ({error})", module.replace(".", "/") + ".py")


def _member(distribution: str, owner: Any, name: str, adapter: str) -> Any:
    value = inspect.getattr_static(owner, name, None)
    if value is None:
        _fail(distribution, f"{getattr(owner, '__qualname__', owner)}.{name} (it is gone)", adapter)
    return getattr(owner, name)


def _expect_parameters(
    distribution: str, function: Callable[..., Any], expected: list[str], adapter: str, *, what: str
) -> None:
    names = [p for p in inspect.signature(function).parameters if p not in {"self", "args", "kwargs"}]
    if names[: len(expected)] != expected:
        _fail(distribution, f"{what}: parameters are now {names}, we call it with {expected}", adapter)


# --- langgraph -------------------------------------------------------------------------------------------

LANGGRAPH = "ai_utils/_compat/langgraph.py"


def test_langgraph_private_names_keep_their_shape() -> None:
    from langgraph.channels.delta import DeltaChannel

    adapter = _adapter("langgraph", "ai_utils._compat.langgraph")

    _expect_parameters(
        "langgraph", adapter.RunnableCallable.__init__, ["func", "afunc", "name", "tags", "trace"], LANGGRAPH,
        what="langgraph._internal._runnable.RunnableCallable",
    )  # fmt: skip
    constants = importlib.import_module("langgraph._internal._constants")
    if getattr(constants, "TASKS", None) != adapter.TASKS_CHANNEL:
        _fail("langgraph", f"the tasks channel (TASKS is {getattr(constants, 'TASKS', None)!r})", LANGGRAPH)
    if getattr(constants, "ERROR", None) != adapter.ERROR_CHANNEL:
        _fail("langgraph", f"the error channel (ERROR is {getattr(constants, 'ERROR', None)!r})", LANGGRAPH)
    if getattr(adapter.DeltaSnapshot, "_fields", None) != ("value",):
        _fail("langgraph-checkpoint", "_DeltaSnapshot (no longer a NamedTuple of `value`)", LANGGRAPH)

    # A delta channel restores a snapshot blob and replays message writes with the reducer, as our
    # compaction and checkpoint readers expect.
    channel: DeltaChannel[Any] = DeltaChannel(adapter.messages_delta_reducer)
    restored = channel.from_checkpoint(adapter.DeltaSnapshot([HumanMessage("a", id="1")]))
    restored.update([[AIMessage("b", id="2")]])
    assert [m.content for m in restored.get()] == ["a", "b"]


def test_tool_runtime_context_is_a_dataclass_field_pydantic_types_from_it() -> None:
    adapter = _adapter("langgraph", "ai_utils._compat.langgraph")
    adapter.quiet_tool_runtime()
    if "context" not in {f.name for f in dataclasses.fields(ToolRuntime)}:
        _fail("langgraph", "ToolRuntime.context (no longer a dataclass field)", LANGGRAPH)
    if "__get_pydantic_core_schema__" in ToolRuntime.__dict__:
        _fail("langgraph", "ToolRuntime's pydantic schema (it now defines its own)", LANGGRAPH)

    @tool
    def reads(query: str, runtime: ToolRuntime[None, dict[str, Any]]) -> str:
        """Reads the runtime."""
        return query

    schema = reads.args_schema
    assert isinstance(schema, type)
    runtime = schema.__pydantic_core_schema__["schema"]["fields"]["runtime"]["schema"]  # a dataclass schema
    context = next(f for f in runtime["schema"]["fields"] if f["name"] == "context")
    if context["schema"]["type"] != "any":
        _fail("pydantic", f"the schema of a generic dataclass field ({context['schema']['type']})", LANGGRAPH)


def test_sql_store_cursor_and_prefix_privates_keep_their_shape() -> None:
    """`recall/_claims.py` updates a row of a PostgresStore / SqliteStore table through these two privates."""
    from langgraph.store.postgres import PostgresStore
    from langgraph.store.sqlite import SqliteStore

    adapter = _adapter("langgraph-checkpoint", "ai_utils._compat.langgraph")
    for distribution, store_cls in (
        ("langgraph-checkpoint-postgres", PostgresStore),
        ("langgraph-checkpoint-sqlite", SqliteStore),
    ):
        _member(distribution, store_cls, "_cursor", LANGGRAPH)
        module = importlib.import_module(store_cls.__module__)
        _member(distribution, module, "_namespace_to_text", LANGGRAPH)
    with SqliteStore.from_conn_string(":memory:") as store:
        store.setup()
        store.put(("a", "b-c"), "k", {"version": 1})
        assert adapter.store_prefix(store, ("a", "b-c")) == "a.b-c"
        with adapter.store_cursor(store) as cur:
            cur.execute("SELECT count(*) FROM store WHERE prefix = ?", (adapter.store_prefix(store, ("a", "b-c")),))
            assert cur.fetchone()[0] == 1


def test_runnable_callable_runs_sync_and_async_untraced_nodes() -> None:
    RunnableCallable = _adapter("langgraph", "ai_utils._compat.langgraph").RunnableCallable

    async def double_async(x: int) -> int:
        return 2 * x

    node = RunnableCallable(lambda x: 2 * x, double_async, name="double", trace=False)
    assert node.invoke(2) == 4
    assert asyncio.run(node.ainvoke(3)) == 6


# --- langchain-core ---------------------------------------------------------------------------------------

CORE = "ai_utils/_compat/langchain_core.py"


def test_create_agent_wraps_hooks_with_its_module_traceable_except_inside_untraced_hooks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain.agents import create_agent, factory
    from langchain.agents.middleware import AgentMiddleware

    adapter = _adapter("langchain", "ai_utils._compat.langchain")
    _member("langchain", factory, "traceable", "ai_utils/_compat/langchain.py")

    class Hook(AgentMiddleware[Any, Any, Any]):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

    with adapter.untraced_hooks():
        pass  # installs the shim
    wrapped: list[str] = []
    real = adapter._real_traceable

    def spy(*args: Any, **kwargs: Any) -> Any:
        wrapped.append(kwargs.get("name", ""))
        return real(*args, **kwargs)

    monkeypatch.setattr(adapter, "_real_traceable", spy)

    def build() -> list[str]:
        wrapped.clear()
        create_agent(FakeChatModel(responses=["hi"]), [], middleware=[Hook()])
        return list(wrapped)

    hooks = build()
    if not any(name.endswith("wrap_model_call") for name in hooks):
        _fail("langchain", "create_agent no longer wraps hooks with factory.traceable", "ai_utils/_compat/langchain.py")
    with adapter.untraced_hooks():
        assert build() == []  # the hooks go into the graph as they are
    assert build() == hooks  # outside the block (and in any other context) langsmith's wrapper, as before


def test_langchain_core_chat_model_privates_keep_their_shape() -> None:
    from langchain_core.language_models import BaseChatModel

    adapter = _adapter("langchain-core", "ai_utils._compat.langchain_core")

    for name, expected in {
        "_generate": ["messages", "stop", "run_manager"],
        "_agenerate": ["messages", "stop", "run_manager"],
        "_get_invocation_params": ["stop"],
        "_get_ls_params_with_defaults": ["stop"],
    }.items():
        method = _member("langchain-core", BaseChatModel, name, CORE)
        _expect_parameters("langchain-core", method, expected, CORE, what=f"BaseChatModel.{name}")
    _member("langchain-core", BaseChatModel, "_serialized", CORE)
    _member("langchain-core", BaseChatModel, "_llm_type", CORE)

    model = FakeChatModel(["hi", "again"])
    assert adapter.llm_type(model)
    assert isinstance(adapter.ls_params(model, {}), dict)
    assert isinstance(adapter.invocation_params(model, {}), dict)
    assert isinstance(adapter.serialized(model), dict)
    result = adapter.generate(model, [HumanMessage("x")], None, {})
    assert result.generations[0].message.content == "hi"
    result = asyncio.run(adapter.agenerate(model, [HumanMessage("x")], None, {}))
    assert result.generations[0].message.content == "again"
    generation = ChatGeneration(message=AIMessage("ok", response_metadata={"a": 1}), generation_info={"b": 2})
    assert adapter.response_metadata(generation) == {"a": 1, "b": 2}


# --- langchain-openai -------------------------------------------------------------------------------------

OPENAI = "ai_utils/_compat/langchain_openai.py (and the overrides in ai_utils/llm/_openai_compat.py)"


def test_langchain_openai_privates_keep_their_shape() -> None:
    from langchain_openai import ChatOpenAI
    from langchain_openai.chat_models.base import BaseChatOpenAI

    adapter = _adapter("langchain-openai", "ai_utils._compat.langchain_openai")

    # Called by the adapter, and (the first three) overridden by ChatOpenAICompatible.
    for name, expected in {
        "_get_request_payload": ["input_", "stop"],
        "_create_chat_result": ["response", "generation_info"],
        "_convert_chunk_to_generation_chunk": ["chunk", "default_chunk_class", "base_generation_info"],
        "_use_responses_api": ["payload"],
        "_agenerate": ["messages", "stop", "run_manager"],
        "_astream": ["messages", "stop", "run_manager"],
    }.items():
        method = _member("langchain-openai", BaseChatOpenAI, name, OPENAI)
        _expect_parameters("langchain-openai", method, expected, OPENAI, what=f"BaseChatOpenAI.{name}")

    llm = ChatOpenAI(model="m", api_key="k", base_url="http://127.0.0.1:9/v1", temperature=0)  # never contacted
    payload = adapter.request_payload(llm, [HumanMessage("hello")], {})
    assert payload["model"] == "m"
    assert payload["messages"] == [{"role": "user", "content": "hello"}]
    assert adapter.uses_responses_api(llm, payload) is False
    reply = {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    }
    result = adapter.chat_result(llm, reply)
    assert isinstance(result, ChatResult)
    assert result.generations[0].message.content == "hi"
    usage = {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}
    assert adapter.usage_metadata(usage, None)["input_tokens"] == 7
    assert (
        adapter.usage_metadata(usage, None)
        == adapter.chat_result(llm, {**reply, "usage": usage}).generations[0].message.usage_metadata
    )


# --- mcp --------------------------------------------------------------------------------------------------

MCP = "ai_utils/_compat/mcp.py"


def test_mcp_client_session_uses_the_schemas_we_hand_it() -> None:
    from mcp import ClientSession, types

    remember_output_schemas = _adapter("mcp", "ai_utils._compat.mcp").remember_output_schemas

    async def check() -> None:
        send, receive = anyio.create_memory_object_stream[Any](1)
        session = ClientSession(receive, send)
        if not isinstance(getattr(session, "_tool_output_schemas", None), dict):
            _fail("mcp", "ClientSession._tool_output_schemas (no longer a dict)", MCP)
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        remember_output_schemas(session, [("count", schema)])
        bad = types.CallToolResult(content=[], structuredContent={"n": "not a number"})
        # With the schema known the SDK validates at once; had it ignored ours it would list the tools
        # again and wait for a server that is not there.
        with anyio.fail_after(2):
            with pytest.raises(RuntimeError, match="Invalid structured content"):
                await session._validate_tool_result("count", bad)
        await send.aclose()
        await receive.aclose()

    asyncio.run(check())


# --- subclass hooks we override ---------------------------------------------------------------------------


def test_overridden_postgres_saver_cursor_hook_exists() -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    where = "ai_utils/sessions/_postgres.py (_FencedPostgresSaver._cursor)"
    cursor = _member("langgraph-checkpoint-postgres", PostgresSaver, "_cursor", where)
    _expect_parameters("langgraph-checkpoint-postgres", cursor, ["pipeline"], where, what="PostgresSaver._cursor")
    calls = [
        n
        for n in ("put", "put_writes", "get_tuple", "list")
        if "self._cursor(" in inspect.getsource(getattr(PostgresSaver, n))
    ]
    if calls != ["put", "put_writes", "get_tuple", "list"]:
        _fail("langgraph-checkpoint-postgres", f"its writes off PostgresSaver._cursor (only {calls} use it)", where)


def test_overridden_deepagents_resolve_path_hook_exists() -> None:
    from deepagents.backends.filesystem import FilesystemBackend

    where = "ai_utils/deep/_sandbox.py (WorkspaceFiles._resolve_path)"
    resolve = _member("deepagents", FilesystemBackend, "_resolve_path", where)
    _expect_parameters("deepagents", resolve, ["key"], where, what="FilesystemBackend._resolve_path")
