"""`KnowledgeJobs`: a durable ingestion queue on a `BaseStore` (seed: polpo ``processNextBrainIngestionJob``).

A job is ``(id, source_id, scope, state, attempts, ...)`` under ``(<namespace>, "jobs")``: identifiers and
lifecycle facts only, never a source body or a credential (the host keeps payloads and resolves them again in
``execute``). A worker claims one job by compare-and-swap on its ``version`` (`ai_utils.recall._claims`), renews
its lease every ``lease_seconds / 3`` while ``execute(job)`` runs, and records the outcome with one more swap
that only succeeds while it still holds the claim: a worker whose lease expired and whose job another worker
took cannot complete it (`KnowledgeJobLostError`). Transient failures (``TimeoutError``, ``ConnectionError``
or an exception with ``transient = True``) put the job back in the queue until it has had ``max_attempts``
(3) attempts; then, or on any other failure, it ends ``"failed"``. A lease that ran out (the worker died or
stalled) counts as such a failure: a job still running on its last attempt when its lease ends is ``"failed"``
with error ``"LeaseExpired"``, never handed out again. Executors must be idempotent: a process can
die after its work is published but before the job is acknowledged, and the job then runs again.

The pure steps (which job to claim, the claimed / renewed / finished values) exist once; `process_next` and
`aprocess_next` are thin shells around them (a renewal thread or task, the executor's call).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

from langgraph.store.base import BaseStore, Item

from ai_utils._secrets import redact_secrets
from ai_utils.exceptions import AiUtilsError, UserError
from ai_utils.recall._claims import Swap, swapper
from ai_utils.recall._items import MemoryScope, micros, to_scope
from ai_utils.recall._scopes import check_namespace

__all__ = ["JobState", "KnowledgeJob", "KnowledgeJobLostError", "KnowledgeJobs"]

logger = logging.getLogger("ai_utils.recall")

JobState = Literal["queued", "running", "succeeded", "failed"]
_SCHEMA = 1
_PAGE = 1_000
_SOURCE_ID = re.compile(r"[\x21-\x7e]{1,512}")
_WORKER_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
_JOB_ID = re.compile(r"j[0-9a-f]{32}")
_ASYNC_EXECUTE = "`execute` is async; call `await jobs.aprocess_next(execute, ...)` instead."
_EXPIRED = "LeaseExpired"
"""The `KnowledgeJob.error` of a job whose lease ran out on its last attempt (its worker died or stalled)."""
# A source id is an identifier: one that carries credentials (URL user info, token-like query or fragment
# parameters, a known key shape) is refused, since the queue must never store them.
_CREDENTIALS = re.compile(
    r"://[^/?#]*@|[?&;#](?:key|[a-z_-]*(?:token|secret|password|passwd|api[_-]?key|private[_-]?key|credential"
    r"|signature|sig|auth)[a-z_-]*)=",
    re.I,
)


class KnowledgeJobLostError(AiUtilsError):
    """A worker lost its claim on a job (its lease ran out and another worker took it); its outcome was not recorded.

    Attributes:
        job_id: the job.
        worker_id: the worker that lost it.
    """

    def __init__(self, message: str, *, job_id: str, worker_id: str) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.worker_id = worker_id


@dataclass(frozen=True, slots=True)
class KnowledgeJob:
    """One ingestion job, as stored.

    Attributes:
        id: the job id.
        source_id: the host's id of the source to ingest (never its body).
        scope: the scope the source belongs to; ``execute`` resolves the source again under it.
        state: ``"queued"``, ``"running"``, ``"succeeded"`` or ``"failed"``.
        attempts: how many times a worker claimed it.
        worker_id: the worker that claimed it last.
        error: the exception class of the last failure (never its message, which may hold data).
        created_at: when it was enqueued.
        updated_at: its last change.
    """

    id: str
    source_id: str
    scope: MemoryScope
    state: JobState
    attempts: int
    worker_id: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime


def _job(value: Mapping[str, Any]) -> KnowledgeJob:
    return KnowledgeJob(
        id=value["id"],
        source_id=value["source_id"],
        scope=to_scope(value["scope"]),
        state=value["state"],
        attempts=int(value["attempts"]),
        worker_id=value["worker_id"],
        error=value["error"],
        created_at=datetime.fromisoformat(value["created_at"]),
        updated_at=datetime.fromisoformat(value["updated_at"]),
    )


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _claimable(row: Item, now: float) -> bool:
    value = row.value
    if value.get("schema") != _SCHEMA:
        return False
    if value.get("state") == "queued":
        return True
    return value.get("state") == "running" and float(value.get("lease_until") or 0) <= now


def _pick(rows: Sequence[Item], now: float) -> list[dict[str, Any]]:
    """Claimable jobs, oldest first."""
    values = [dict(r.value) for r in rows if _claimable(r, now)]
    return sorted(values, key=lambda v: (v.get("created_key", ""), v["id"]))


def _claimed(value: Mapping[str, Any], worker_id: str, lease_seconds: float) -> dict[str, Any]:
    return {
        **value,
        "state": "running",
        "attempts": int(value["attempts"]) + 1,
        "worker_id": worker_id,
        "claim": uuid.uuid4().hex,
        "lease_until": time.time() + lease_seconds,
        "version": int(value["version"]) + 1,
        "updated_at": _now_iso(),
    }


def _renewed(value: Mapping[str, Any], lease_seconds: float) -> dict[str, Any]:
    return {**value, "lease_until": time.time() + lease_seconds, "version": int(value["version"]) + 1}


def _finished(value: Mapping[str, Any], state: JobState, error: str | None) -> dict[str, Any]:
    done = {**value, "state": state, "error": error, "version": int(value["version"]) + 1, "updated_at": _now_iso()}
    if state == "queued":
        done.update(claim=None, lease_until=None)
    return done


@dataclass(slots=True)
class _Hold:
    """What a worker holds while its executor runs: the job value it last wrote, and whether it lost the claim.

    ``lock`` orders a renewal against the outcome: a renewal still running when the executor ends (a cancelled
    task's thread goes on) would otherwise move the version under the outcome's swap, and the worker would lose
    a job it held. Once ``closed``, no renewal is made.
    """

    value: dict[str, Any]
    lost: bool = False
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def _is_transient(error: Exception) -> bool:
    return getattr(error, "transient", None) is True


class KnowledgeJobs:
    """A durable knowledge-ingestion queue on a `BaseStore` (SPEC §22; see the module docstring).

    Example:
        ```python
        jobs = KnowledgeJobs(store)
        jobs.enqueue("doc-42", MemoryScope("tenant", "acme"))
        job = jobs.process_next(lambda job: ingest(job.source_id, job.scope), worker_id="worker-1")
        # job.state == "succeeded"; None when nothing was queued
        ```

    Args:
        store: an `InMemoryStore`, `PostgresStore` or `SqliteStore` (stores with a compare-and-swap we can use).
        namespace: the host-owned root label; jobs live under ``(namespace, "jobs")``.
        max_attempts: claims a job gets for transient failures before it ends ``"failed"``.
        transient: exception types that are retried (besides any exception with ``transient = True``).

    Raises:
        UserError: another kind of store, a bad namespace or ``max_attempts``.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        namespace: str = "knowledge",
        max_attempts: int = 3,
        transient: tuple[type[BaseException], ...] = (TimeoutError, ConnectionError),
    ) -> None:
        if not isinstance(store, BaseStore):
            raise UserError(f"`store` must be a LangGraph BaseStore, got {store!r}.")
        if type(max_attempts) is not int or not 1 <= max_attempts <= 100:
            raise UserError(f"`max_attempts` must be an int from 1 to 100, got {max_attempts!r}.")
        self.store = store
        self.namespace = check_namespace(namespace)
        self.max_attempts = max_attempts
        self.transient = tuple(transient)
        self._swap: Swap = swapper(store)
        self._ns = (self.namespace, "jobs")

    # --- enqueue / get -------------------------------------------------------------------------------------

    def _new_value(self, source_id: object, scope: object) -> dict[str, Any]:
        if not isinstance(source_id, str) or not _SOURCE_ID.fullmatch(source_id):
            raise UserError(
                f"`source_id` must be 1-512 printable ASCII characters without spaces, got {source_id!r}. "
                "Enqueue the source's id; the queue never stores source bodies."
            )
        if _CREDENTIALS.search(source_id) or redact_secrets(source_id)[1]:
            raise UserError(
                "`source_id` looks like it carries credentials (URL user info, a token-like parameter or a key). "
                "Enqueue a plain id and resolve credentials in `execute` from the host's secret store."
            )
        the_scope = to_scope(scope)
        now = datetime.now(UTC)
        return {
            "schema": _SCHEMA,
            "id": "j" + uuid.uuid4().hex,
            "source_id": source_id,
            "scope": {"kind": the_scope.kind, "subject_id": the_scope.subject_id},
            "state": "queued",
            "attempts": 0,
            "worker_id": None,
            "claim": None,
            "lease_until": None,
            "version": 1,
            "error": None,
            "created_at": now.isoformat(),
            "updated_at": now.isoformat(),
            "created_key": f"{micros(now):020d}",
        }

    def enqueue(self, source_id: str, scope: MemoryScope) -> KnowledgeJob:
        """Queue ``source_id`` of ``scope`` for ingestion.

        Args:
            source_id: the host's id of the source (a document id, a path, a URL without credentials).
            scope: the scope it belongs to.

        Returns:
            The queued job.

        Raises:
            UserError: a malformed or credential-bearing source id, or a bad scope.
        """
        value = self._new_value(source_id, scope)
        self.store.put(self._ns, value["id"], value, index=False)
        return _job(value)

    async def aenqueue(self, source_id: str, scope: MemoryScope) -> KnowledgeJob:
        """Async twin of `enqueue` (the store call runs in a worker thread, as every job step does)."""
        return await asyncio.to_thread(self.enqueue, source_id, scope)

    def get(self, job_id: str) -> KnowledgeJob | None:
        """The job ``job_id`` as stored, or ``None``.

        Raises:
            UserError: a malformed job id.
        """
        if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
            raise UserError(f"A knowledge job id is 'j' and 32 hex digits, got {job_id!r}.")
        row = self.store.get(self._ns, job_id, refresh_ttl=False)
        return _job(row.value) if row is not None and row.namespace == self._ns else None

    # --- the worker's steps (blocking: the shells call them directly or in a thread) -----------------------

    def _rows(self, state: str) -> list[Item]:
        """Every job in ``state``, read page by page.

        The SQL stores return the most recently updated first, so reading only the first page would leave the oldest
        jobs waiting behind newer ones for as long as new ones keep coming.
        """
        rows: list[Item] = []
        while True:
            page = self.store.search(
                self._ns, filter={"state": state}, limit=_PAGE, offset=len(rows), refresh_ttl=False
            )
            rows.extend(page)
            if len(page) < _PAGE:
                return [r for r in rows if r.namespace == self._ns]

    def _claim(self, worker_id: str, lease_seconds: float) -> _Hold | None:
        rows = [*self._rows("queued"), *self._rows("running")]
        for value in _pick(rows, time.time()):
            if value["state"] == "running" and int(value["attempts"]) >= self.max_attempts:
                # Its worker died or stalled on every attempt (a lease running out is a transient failure too):
                # end the job instead of handing it out forever.
                if self._swap(self._ns, value["id"], int(value["version"]), _finished(value, "failed", _EXPIRED)):
                    logger.warning("Knowledge job %s lost its lease on its last attempt; it has failed.", value["id"])
                continue
            claimed = _claimed(value, worker_id, lease_seconds)
            if self._swap(self._ns, value["id"], int(value["version"]), claimed):
                return _Hold(claimed)
        return None

    def _renew(self, hold: _Hold, lease_seconds: float) -> bool:
        with hold.lock:
            if hold.closed:
                return False
            renewed = _renewed(hold.value, lease_seconds)
            if self._swap(self._ns, renewed["id"], int(hold.value["version"]), renewed):
                hold.value = renewed
                return True
            hold.lost = True
            return False

    def _outcome(self, hold: _Hold, error: Exception | None) -> tuple[JobState, str | None]:
        if error is None:
            return "succeeded", None
        name = type(error).__name__
        retry = isinstance(error, self.transient) or _is_transient(error)
        state: JobState = "queued" if retry and int(hold.value["attempts"]) < self.max_attempts else "failed"
        logger.warning(
            "Knowledge job %s attempt %s failed with %s; %s.",
            hold.value["id"],
            hold.value["attempts"],
            name,
            "queued again" if state == "queued" else "it has failed",
        )
        return state, name

    def _finish(self, hold: _Hold, state: JobState, error: str | None, worker_id: str) -> KnowledgeJob:
        with hold.lock:
            hold.closed = True
            done = _finished(hold.value, state, error)
            recorded = not hold.lost and self._swap(self._ns, done["id"], int(hold.value["version"]), done)
        if not recorded:
            raise KnowledgeJobLostError(
                f"Worker {worker_id!r} lost its claim on knowledge job {done['id']!r} (its lease ran out and another "
                "worker took the job), so its outcome was not recorded. Keep executors idempotent and renewals "
                "timely: lease_seconds must exceed the longest pause of a worker.",
                job_id=done["id"],
                worker_id=worker_id,
            )
        return _job(done)

    # --- the shells ----------------------------------------------------------------------------------------

    def process_next(
        self, execute: Callable[[KnowledgeJob], Any], *, worker_id: str, lease_seconds: float = 60
    ) -> KnowledgeJob | None:
        """Claim the oldest claimable job, run ``execute(job)`` while renewing the lease, record the outcome.

        Args:
            execute: ``execute(job)``; it must resolve the source itself (under ``job.scope``) and be idempotent.
                Raising a transient error retries the job (up to ``max_attempts`` claims); any other error fails it.
            worker_id: this worker's name (1-128 letters, digits, ``.``, ``_``, ``:``, ``@``, ``-``).
            lease_seconds: how long a claim holds without renewal; renewed every third of it.

        Returns:
            The job as recorded (``"succeeded"``, ``"queued"`` again after a transient failure, or ``"failed"``),
            or ``None`` when no job could be claimed.

        Raises:
            KnowledgeJobLostError: another worker took the job while ``execute`` ran; nothing was recorded.
            UserError: bad arguments (or an async ``execute``: use `aprocess_next`).
        """
        self._check_worker(worker_id, lease_seconds)
        async_call = inspect.iscoroutinefunction(type(execute).__call__)  # an object with `async def __call__`
        if inspect.iscoroutinefunction(execute) or async_call:
            raise UserError(_ASYNC_EXECUTE)
        hold = self._claim(worker_id, lease_seconds)
        if hold is None:
            return None
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(lease_seconds / 3):
                if not self._renew(hold, lease_seconds):
                    return

        renewer = threading.Thread(target=renew, name=f"knowledge-lease-{hold.value['id']}", daemon=True)
        renewer.start()
        failure: Exception | None = None
        unawaited = False
        try:
            result = execute(_job(hold.value))
            if inspect.isawaitable(result):
                # Nothing ran (the work is in an awaitable this call cannot await): never record it as done.
                if inspect.iscoroutine(result):
                    result.close()
                unawaited = True
                failure = UserError(_ASYNC_EXECUTE)
        except Exception as error:
            failure = error
        finally:
            stop.set()
            renewer.join()
        state, name = self._outcome(hold, failure)
        done = self._finish(hold, state, name, worker_id)
        if unawaited:
            raise UserError(_ASYNC_EXECUTE)
        return done

    async def aprocess_next(
        self,
        execute: Callable[[KnowledgeJob], Awaitable[Any] | Any],
        *,
        worker_id: str,
        lease_seconds: float = 60,
    ) -> KnowledgeJob | None:
        """Async twin of `process_next`: ``execute`` may be async; store calls run in a worker thread."""
        self._check_worker(worker_id, lease_seconds)
        hold = await asyncio.to_thread(self._claim, worker_id, lease_seconds)
        if hold is None:
            return None

        async def renew() -> None:
            while True:
                await asyncio.sleep(lease_seconds / 3)
                if not await asyncio.to_thread(self._renew, hold, lease_seconds):
                    return

        renewer = asyncio.create_task(renew())
        failure: Exception | None = None
        try:
            job = _job(hold.value)
            if inspect.iscoroutinefunction(execute):
                await cast("Callable[[KnowledgeJob], Awaitable[Any]]", execute)(job)
            else:
                result = await asyncio.to_thread(execute, job)
                if inspect.isawaitable(result):
                    await result
        except Exception as error:
            failure = error
        finally:
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)
        state, name = self._outcome(hold, failure)
        return await asyncio.to_thread(self._finish, hold, state, name, worker_id)

    @staticmethod
    def _check_worker(worker_id: object, lease_seconds: object) -> None:
        if not isinstance(worker_id, str) or not _WORKER_ID.fullmatch(worker_id):
            raise UserError(f"`worker_id` must be 1-128 letters, digits, '.', '_', ':', '@' or '-', got {worker_id!r}.")
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)):
            raise UserError(f"`lease_seconds` must be a number of seconds, got {lease_seconds!r}.")
        if not 0.05 <= lease_seconds <= 86_400:
            raise UserError(f"`lease_seconds` must be from 0.05 to 86400, got {lease_seconds!r}.")
