"""Checkpoints in Supabase over PostgREST (extra ``supabase``)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from pydantic import ValidationError

from ai_utils._json import fast_json
from ai_utils._optional import missing_extra
from ai_utils.exceptions import UserError
from ai_utils.memory._error_writes import without_error_text
from ai_utils.memory._supabase_rows import (
    CHECKPOINT_COLUMNS,
    WRITE_COLUMNS,
    Row,
    checkpoint_row,
    configurable,
    json_safe,
    pending_writes,
    thread_config,
    tuple_of,
    write_rows,
)
from ai_utils.memory._supabase_tables import SupabaseCheckpointError, check_table, refusal, supabase_checkpoints_sql
from ai_utils.memory._threaded import ThreadedAsyncSaver

try:
    from httpx import USE_CLIENT_DEFAULT
    from postgrest import APIError, SyncPostgrestClient
    from postgrest.exceptions import APIErrorFromJSON, generate_default_error_message
    from postgrest.types import ReturnMethod
    from supabase import AsyncClient, Client
except ImportError as _import_error:
    raise missing_extra("supabase", extra="supabase", feature="SupabaseCheckpointSaver") from _import_error

__all__ = ["SupabaseCheckpointError", "SupabaseCheckpointSaver", "supabase_checkpoints_sql"]

Rows = list[Row]
Ids = list[str]
# The RPC body as postgrest-py encodes it (compact, non-ASCII kept); the values are already plain JSON data.
_dumps = fast_json(json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode, default=str)
# Keeps `in.(...)` query strings well below URL length limits.
_IDS_PER_QUERY = 100


class SupabaseCheckpointSaver(ThreadedAsyncSaver):
    """A LangGraph checkpoint saver that stores threads in Supabase tables over PostgREST.

    Create the tables and functions once with the SQL from `supabase_checkpoints_sql` (shipped as
    ``ai_utils/memory/supabase_checkpoints.sql``), then pass a supabase-py client created with the
    **service role** key (the tables are not readable with the anon key)::

        from supabase import create_client

        from ai_utils.memory import SupabaseCheckpointSaver

        saver = SupabaseCheckpointSaver(create_client(url, service_role_key))
        agent = create_agent(model=llm, tools=tools, checkpointer=saver)

    Checkpoints and writes are serialised with the saver's ``serde`` (LangGraph's JsonPlus
    serializer by default) and stored base64-encoded; metadata is stored as JSON, so ``list(filter=...)``
    runs in the database. Every write is an upsert keyed by ``(thread_id, checkpoint_ns,
    checkpoint_id)`` and ``(..., task_id, idx)``, so concurrent writers to one thread never overwrite
    each other's checkpoints. The async methods run the sync ones in worker threads. Use the default
    ``table`` name only when ``postgres_saver`` does not share the schema (it owns a ``checkpoints``
    table too).

    Args:
        client: a ``supabase.Client`` (``create_client(url, key)``) or a postgrest ``SyncPostgrestClient``.
        table: the checkpoint table; writes live in ``<table>_writes``.
        serde: the serializer; defaults to LangGraph's.
        page_size: rows per request when listing (Supabase returns at most 1000 rows per request).

    Raises:
        UserError: ``client`` is not a supabase client, ``table`` is not a plain identifier, or ``page_size``
            is out of range.
    """

    def __init__(
        self,
        client: Client,
        *,
        table: str = "checkpoints",
        serde: SerializerProtocol | None = None,
        page_size: int = 500,
    ) -> None:
        if not callable(getattr(client, "table", None)) or isinstance(client, type):
            raise UserError(
                f"SupabaseCheckpointSaver needs a supabase client, got {type(client).__name__}. "
                "Pass create_client(SUPABASE_URL, SUPABASE_SERVICE_ROLE_KEY)."
            )
        if isinstance(client, AsyncClient):
            raise UserError(
                "SupabaseCheckpointSaver needs the sync supabase client (create_client), got an AsyncClient; "
                "its async methods already run without blocking the event loop."
            )
        super().__init__(serde=serde)
        self.client = client
        self.table = check_table(table)
        self.writes_table = f"{self.table}_writes"
        if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 1000:
            raise UserError(f"page_size must be an int from 1 to 1000, got {page_size!r}. Keep the default 500.")
        self.page_size = page_size

    def __repr__(self) -> str:
        return f"SupabaseCheckpointSaver(table={self.table!r})"

    def _run(self, query: Any, what: str) -> list[dict[str, Any]]:
        try:
            response = query.execute()
        except APIError as error:
            raise refusal(error.code, error.message, what, self.table) from None
        return cast("list[dict[str, Any]]", response.data or [])

    def _call(self, function: str, params: dict[str, Any], what: str) -> Any:
        """The result of the shipped SQL function ``function`` (one PostgREST ``/rpc`` request).

        Sent on the client's own httpx session with its PostgREST URL and headers (so auth changes,
        timeouts, proxies and TLS settings apply as for ``client.rpc``), but without postgrest-py's request
        builder, and with the JSON body encoded by orjson: `put` and `get_tuple` are on every LangGraph
        step, and those two cost more client time than the request itself (benchmarks/bench_memory.py).
        The request is the one ``client.rpc(function, params).execute()`` sends; errors read the same.
        """
        # A supabase Client (whose `postgrest` is rebuilt after an auth change), or a SyncPostgrestClient.
        rest = cast("SyncPostgrestClient", getattr(self.client, "postgrest", self.client))
        headers = rest.headers.copy()
        headers["Content-Type"] = "application/json"
        # As postgrest-py decides: its own basic auth, else the session's unless the headers carry a token.
        auth = rest.basic_auth if rest.basic_auth is not None or "Authorization" in headers else USE_CLIENT_DEFAULT
        url = str(rest.base_url.joinpath("rpc", function))
        response = rest.session.request("POST", url, content=_dumps(params).encode(), headers=headers, auth=auth)
        if response.is_success:
            return json.loads(response.content) if response.content else None
        try:
            error = dict(APIErrorFromJSON.model_validate_json(response.content))
        except ValidationError:
            error = generate_default_error_message(response)
        raise refusal(error.get("code"), error.get("message"), what, self.table)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Return the checkpoint ``config`` names, or the thread's latest one without a ``checkpoint_id``.

        One request: the shipped ``<table>_get_tuple`` function returns the checkpoint with its pending writes.
        """
        conf = configurable(config)
        params = {
            "p_thread_id": str(conf["thread_id"]),
            "p_checkpoint_ns": conf.get("checkpoint_ns") or "",
            "p_checkpoint_id": get_checkpoint_id(config),
        }
        found = self._call(f"{self.table}_get_tuple", params, "read a checkpoint")
        if not found:
            return None
        row = found["checkpoint"]
        return tuple_of(self.serde, row, pending_writes(self.serde, found["writes"]))

    def _pending_writes(self, thread_id: str, ns: str, checkpoint_ids: Sequence[str]) -> dict[str, list[PendingWrite]]:
        rows: list[dict[str, Any]] = []
        for start in range(0, len(checkpoint_ids), _IDS_PER_QUERY):
            chunk = checkpoint_ids[start : start + _IDS_PER_QUERY]
            offset = 0
            while True:
                query = (
                    self.client.table(self.writes_table)
                    .select(WRITE_COLUMNS)
                    .eq("thread_id", thread_id)
                    .eq("checkpoint_ns", ns)
                    .in_("checkpoint_id", chunk)
                    .order("checkpoint_id")
                    .order("task_path")
                    .order("task_id")
                    .order("idx")
                    .range(offset, offset + self.page_size - 1)
                )
                page = self._run(query, "read pending writes")
                rows.extend(page)
                if len(page) < self.page_size:
                    break
                offset += self.page_size
        return pending_writes(self.serde, rows)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoints newest first, optionally of one thread, matching ``filter``, before ``before``."""
        remaining = limit
        offset = 0
        while remaining is None or remaining > 0:
            size = self.page_size if remaining is None else min(self.page_size, remaining)
            query = self.client.table(self.table).select(CHECKPOINT_COLUMNS)
            if config is not None:
                conf = configurable(config)
                query = query.eq("thread_id", str(conf["thread_id"]))
                if conf.get("checkpoint_ns") is not None:
                    query = query.eq("checkpoint_ns", conf["checkpoint_ns"])
                if checkpoint_id := get_checkpoint_id(config):
                    query = query.eq("checkpoint_id", checkpoint_id)
            if filter:
                query = query.contains("metadata", json_safe(filter))
            if before is not None and (before_id := get_checkpoint_id(before)):
                query = query.lt("checkpoint_id", before_id)
            query = query.order("checkpoint_id", desc=True).order("thread_id").order("checkpoint_ns")
            rows = self._run(query.range(offset, offset + size - 1), "list checkpoints")
            yield from self._tuples(rows)
            if len(rows) < size:
                return
            offset += size
            if remaining is not None:
                remaining -= size

    def _tuples(self, rows: Rows) -> Iterator[CheckpointTuple]:
        groups: dict[tuple[str, str], Ids] = {}
        for row in rows:
            groups.setdefault((row["thread_id"], row["checkpoint_ns"]), []).append(row["checkpoint_id"])
        writes = {key: self._pending_writes(key[0], key[1], ids) for key, ids in groups.items()}
        for row in rows:
            yield tuple_of(self.serde, row, writes[(row["thread_id"], row["checkpoint_ns"])])

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` (an upsert, so a retried put is harmless) and return its config."""
        row = checkpoint_row(self.serde, config, checkpoint, metadata)
        # One request: the shipped ``<table>_put`` function upserts the row.
        self._call(f"{self.table}_put", {f"p_{key}": value for key, value in row.items()}, "store a checkpoint")
        return thread_config(row["thread_id"], row["checkpoint_ns"], checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's intermediate writes for the checkpoint ``config`` names.

        Regular writes keep the first stored value for a ``(task_id, idx)`` (as LangGraph's own savers
        do); special writes (errors, interrupts) replace it. A failed task's exception is stored as its class
        name only (`without_error_text`).
        """
        if not writes:
            return
        writes = without_error_text(writes)
        rows = write_rows(self.serde, config, writes, task_id, task_path)
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        query = self.client.table(self.writes_table).upsert(
            rows,
            on_conflict="thread_id,checkpoint_ns,checkpoint_id,task_id,idx",
            ignore_duplicates=not replace,
            returning=ReturnMethod.minimal,
        )
        self._run(query, "store pending writes")

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of ``thread_id``."""
        for table in (self.writes_table, self.table):
            query = self.client.table(table).delete(returning=ReturnMethod.minimal).eq("thread_id", str(thread_id))
            self._run(query, "delete a thread")

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Walk the parent chain of ``config``'s checkpoint collecting writes of ``channels`` (delta channels).

        Same result as LangGraph's default, which reads one ancestor per request; this reads the thread's
        older checkpoints page by page (with their writes) and stops at the last channel's snapshot.
        """
        if not channels:
            return {}
        collected: dict[str, list[PendingWrite]] = {channel: [] for channel in channels}
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        target = self.get_tuple(config)
        wanted = get_checkpoint_id(target.parent_config) if target and target.parent_config else None
        if target is not None and wanted is not None:
            thread = {"configurable": {k: target.config["configurable"][k] for k in ("thread_id", "checkpoint_ns")}}
            for item in self.list(cast("RunnableConfig", thread), before=target.config):
                if item.checkpoint["id"] != wanted:
                    continue  # off the parent chain (a fork)
                for write in reversed(item.pending_writes or []):
                    if write[1] in remaining:
                        collected[write[1]].append(write)
                for channel in list(remaining):
                    if channel in item.checkpoint["channel_values"]:
                        seeds[channel] = item.checkpoint["channel_values"][channel]
                        remaining.discard(channel)
                wanted = get_checkpoint_id(item.parent_config) if item.parent_config else None
                if wanted is None or not remaining:
                    break
        result: dict[str, DeltaChannelHistory] = {}
        for channel in channels:
            entry: DeltaChannelHistory = {"writes": collected[channel][::-1]}
            if channel in seeds:
                entry["seed"] = seeds[channel]
            result[channel] = entry
        return result

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Return a channel version greater than ``current`` (zero-padded counter + random suffix)."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"
