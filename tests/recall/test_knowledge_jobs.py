"""`KnowledgeJobs`: claims by compare-and-swap, leases, retries, terminal states — in memory, SQLite and Postgres."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from recall._fakes import fresh_database

from ai_utils import KnowledgeJob, KnowledgeJobs, MemoryScope, UserError

TENANT = MemoryScope("tenant", "acme")
WORKER = Path(__file__).parent / "_job_worker.py"
StoreFactory = Callable[..., BaseStore]


class Flaky(Exception):
    transient = True


def test_a_job_is_claimed_executed_and_recorded_once(make_store: StoreFactory) -> None:
    store = make_store()
    jobs = KnowledgeJobs(store)
    queued = jobs.enqueue("doc-42", TENANT)
    assert (queued.state, queued.attempts, queued.worker_id) == ("queued", 0, None)
    seen: list[KnowledgeJob] = []
    done = jobs.process_next(seen.append, worker_id="worker-1")
    assert done is not None and (done.id, done.state, done.attempts, done.worker_id) == (
        queued.id,
        "succeeded",
        1,
        "worker-1",
    )
    assert [(j.id, j.source_id, j.scope, j.state) for j in seen] == [(queued.id, "doc-42", TENANT, "running")]
    assert jobs.get(queued.id) == done
    assert jobs.process_next(seen.append, worker_id="worker-1") is None  # terminal: never claimed again
    assert len(seen) == 1


def test_transient_failures_are_retried_three_times_then_fail(make_store: StoreFactory) -> None:
    jobs = KnowledgeJobs(make_store())
    job = jobs.enqueue("https://example.com/handbook.pdf", TENANT)
    attempts: list[int] = []

    def down(j: KnowledgeJob) -> None:
        attempts.append(j.attempts)
        raise ConnectionError("source server down; token=s3cr3t")

    states = [jobs.process_next(down, worker_id="w") for _ in range(3)]
    assert [(s.state, s.attempts, s.error) for s in states if s] == [
        ("queued", 1, "ConnectionError"),
        ("queued", 2, "ConnectionError"),
        ("failed", 3, "ConnectionError"),
    ]
    assert attempts == [1, 2, 3]
    assert jobs.process_next(down, worker_id="w") is None
    # The queue keeps ids and states: never the failure's message (it may hold data or credentials).
    stored = jobs.store.get(("knowledge", "jobs"), job.id)
    assert stored is not None and "s3cr3t" not in repr(stored.value)
    assert set(stored.value) == {
        "schema", "id", "source_id", "scope", "state", "attempts", "worker_id", "claim", "lease_until", "version",
        "error", "created_at", "updated_at", "created_key",
    }  # fmt: skip


def test_a_flaky_source_succeeds_on_a_retry_and_a_permanent_error_fails_at_once(make_store: StoreFactory) -> None:
    jobs = KnowledgeJobs(make_store())
    flaky = jobs.enqueue("doc-1", TENANT)
    calls = Counter[str]()

    def sometimes(j: KnowledgeJob) -> None:
        calls[j.id] += 1
        if calls[j.id] < 3:
            raise Flaky("try again")

    results = [jobs.process_next(sometimes, worker_id="w") for _ in range(3)]
    assert [r.state for r in results if r] == ["queued", "queued", "succeeded"]
    assert jobs.get(flaky.id).attempts == 3  # type: ignore[union-attr]

    broken = jobs.enqueue("doc-2", TENANT)

    def bug(j: KnowledgeJob) -> None:
        raise ValueError("parser bug")

    failed = jobs.process_next(bug, worker_id="w")
    assert failed is not None and (failed.id, failed.state, failed.attempts, failed.error) == (
        broken.id,
        "failed",
        1,
        "ValueError",
    )


def test_the_oldest_job_is_claimed_first_also_behind_a_long_queue(make_store: StoreFactory) -> None:
    jobs = KnowledgeJobs(make_store())
    ids = [jobs.enqueue(f"doc-{n}", TENANT).id for n in range(120)]
    claimed = [jobs.process_next(lambda j: None, worker_id="w") for _ in range(3)]
    assert [j.id for j in claimed if j] == ids[:3]


class WorkerDied(BaseException):
    """Stands for a worker process dying mid-job: not an `Exception`, so nothing records an outcome."""


def test_a_job_whose_workers_keep_dying_ends_failed_after_three_attempts(make_store: StoreFactory) -> None:
    jobs = KnowledgeJobs(make_store())
    poison = jobs.enqueue("doc-poison", TENANT)

    def die(j: KnowledgeJob) -> None:
        raise WorkerDied

    for _ in range(3):
        with pytest.raises(WorkerDied):
            jobs.process_next(die, worker_id="w", lease_seconds=0.05)
        time.sleep(0.1)  # the dead worker's lease runs out
    assert jobs.process_next(die, worker_id="w", lease_seconds=0.05) is None  # not handed out a fourth time
    final = jobs.get(poison.id)
    assert final is not None and (final.state, final.attempts, final.error) == ("failed", 3, "LeaseExpired")
    assert jobs.process_next(die, worker_id="w") is None


def _drain(jobs: KnowledgeJobs, worker: str, executed: Counter[str], lock: threading.Lock) -> None:
    def execute(job: KnowledgeJob) -> None:
        with lock:
            executed[job.id] += 1

    while jobs.process_next(execute, worker_id=worker, lease_seconds=30) is not None:
        pass


def test_two_workers_on_postgres_with_their_own_connections_run_each_job_once(postgres_uri: str) -> None:
    from langgraph.store.postgres import PostgresStore

    with (
        fresh_database(postgres_uri) as uri,
        PostgresStore.from_conn_string(uri) as first,
        PostgresStore.from_conn_string(uri) as second,
    ):
        first.setup()
        queue = KnowledgeJobs(first)
        ids = {queue.enqueue(f"doc-{n}", TENANT).id for n in range(24)}
        executed: Counter[str] = Counter()
        lock = threading.Lock()
        workers = [
            threading.Thread(target=_drain, args=(KnowledgeJobs(store), name, executed, lock))
            for store, name in ((first, "worker-a"), (second, "worker-b"))
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=120)
        assert set(executed) == ids and set(executed.values()) == {1}
        finished = [queue.get(i) for i in ids]
        assert {j.state for j in finished if j} == {"succeeded"}


def test_a_postgres_store_in_pipeline_mode_claims_and_records_jobs(postgres_uri: str) -> None:
    from langgraph.store.postgres import PostgresStore

    with fresh_database(postgres_uri) as uri:
        with PostgresStore.from_conn_string(uri) as plain:
            plain.setup()
        with PostgresStore.from_conn_string(uri, pipeline=True) as store:
            jobs = KnowledgeJobs(store)
            job = jobs.enqueue("doc-piped", TENANT)
            done = jobs.process_next(lambda j: None, worker_id="w", lease_seconds=30)
            assert done is not None and (done.id, done.state) == (job.id, "succeeded")
            assert jobs.get(job.id) == done


def test_two_threads_on_one_in_memory_store_run_each_job_once() -> None:
    store = InMemoryStore()
    queue = KnowledgeJobs(store)
    ids = {queue.enqueue(f"doc-{n}", TENANT).id for n in range(30)}
    executed: Counter[str] = Counter()
    lock = threading.Lock()
    workers = [threading.Thread(target=_drain, args=(KnowledgeJobs(store), f"w{n}", executed, lock)) for n in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert set(executed) == ids and set(executed.values()) == {1}


@pytest.fixture
def postgres_queue(postgres_uri: str) -> Iterator[tuple[str, KnowledgeJobs]]:
    from langgraph.store.postgres import PostgresStore

    with fresh_database(postgres_uri) as uri, PostgresStore.from_conn_string(uri) as store:
        store.setup()
        yield uri, KnowledgeJobs(store)


def _line(proc: subprocess.Popen[str], deadline: float) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line or time.monotonic() < deadline, "worker process said nothing"
    return line


def test_a_worker_whose_lease_was_stolen_cannot_complete_the_job(postgres_queue: tuple[str, KnowledgeJobs]) -> None:
    uri, jobs = postgres_queue
    job = jobs.enqueue("doc-stolen", TENANT)
    executed: list[str] = []
    with subprocess.Popen(
        [sys.executable, str(WORKER), uri, "worker-a"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ) as proc:
        try:
            deadline = time.monotonic() + 60
            assert _line(proc, deadline) == f"started {job.id}"
            os.kill(proc.pid, signal.SIGSTOP)  # worker A pauses mid-job (GC pause, VM freeze): no renewals

            taken = None
            while taken is None:  # B can claim only once A's 1 s lease has run out (bounded wait on that)
                assert time.monotonic() < deadline, "the paused worker's lease never expired"
                taken = jobs.process_next(lambda j: executed.append(j.id), worker_id="worker-b", lease_seconds=30)
                if taken is None:
                    time.sleep(0.1)
            assert (taken.id, taken.state, taken.worker_id, taken.attempts) == (job.id, "succeeded", "worker-b", 2)

            os.kill(proc.pid, signal.SIGCONT)
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert _line(proc, deadline) == f"lost {job.id}"
            assert proc.wait(timeout=60) == 3
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
    assert executed == [job.id]
    final = jobs.get(job.id)
    assert final is not None and (final.state, final.worker_id) == ("succeeded", "worker-b")


def test_the_lease_is_renewed_while_the_executor_uses_the_same_postgres_store(
    postgres_queue: tuple[str, KnowledgeJobs],
) -> None:
    _, jobs = postgres_queue
    job = jobs.enqueue("doc-busy", TENANT)
    store = jobs.store

    def ingest(j: KnowledgeJob) -> None:
        # The usual executor writes what it ingests into the same store (one connection) for several leases.
        until = time.monotonic() + 1.2
        n = 0
        while time.monotonic() < until:
            store.put(("ingested", j.id), f"chunk-{n % 20}", {"text": "..."})
            store.search(("ingested", j.id), limit=5)
            n += 1

    done = jobs.process_next(ingest, worker_id="busy-worker", lease_seconds=0.3)
    assert done is not None and (done.id, done.state, done.attempts) == (job.id, "succeeded", 1)


async def test_aprocess_next_awaits_an_async_executor_and_renews_its_lease() -> None:
    jobs = KnowledgeJobs(InMemoryStore())
    job = await jobs.aenqueue("doc-async", TENANT)
    renewed = asyncio.Event()

    async def execute(j: KnowledgeJob) -> None:
        # Hold the job until a renewal has moved its lease on (lease 0.3 s: renewed every 0.1 s).
        start = jobs.store.get(("knowledge", "jobs"), j.id).value["lease_until"]  # type: ignore[union-attr]
        for _ in range(300):
            if jobs.store.get(("knowledge", "jobs"), j.id).value["lease_until"] > start:  # type: ignore[union-attr]
                renewed.set()
                return
            await asyncio.sleep(0.02)

    done = await jobs.aprocess_next(execute, worker_id="async-worker", lease_seconds=0.3)
    assert renewed.is_set() and done is not None and (done.id, done.state) == (job.id, "succeeded")


def test_an_executor_that_returns_an_awaitable_in_the_sync_call_never_counts_as_done() -> None:
    class Ingest:
        async def __call__(self, job: KnowledgeJob) -> None:
            raise AssertionError("never awaited by the sync call")

    async def ingest(job: KnowledgeJob) -> None:
        raise AssertionError("never awaited by the sync call")

    jobs = KnowledgeJobs(InMemoryStore())
    first = jobs.enqueue("doc-1", TENANT)
    with pytest.raises(UserError, match="aprocess_next"):
        jobs.process_next(Ingest(), worker_id="w")
    assert jobs.get(first.id).state == "queued"  # type: ignore[union-attr]  # refused before it was claimed
    with pytest.raises(UserError, match="aprocess_next"):
        jobs.process_next(lambda job: ingest(job), worker_id="w")
    # Claimed, but nothing ran: it is never recorded as succeeded.
    assert jobs.get(first.id).state == "failed"  # type: ignore[union-attr]


class _SlowReadStore(InMemoryStore):
    """An InMemoryStore whose reads take a while (a remote store under load): renewals are slow."""

    def get(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.15)
        return super().get(*args, **kwargs)


async def test_a_renewal_still_running_when_the_executor_ends_does_not_cost_the_claim() -> None:
    jobs = KnowledgeJobs(_SlowReadStore())
    job = jobs.enqueue("doc-slow", TENANT)

    async def execute(j: KnowledgeJob) -> None:
        await asyncio.sleep(0.2)  # ends while the first renewal (started at 0.1 s) is still reading

    done = await jobs.aprocess_next(execute, worker_id="w", lease_seconds=0.3)
    assert done is not None and (done.id, done.state) == (job.id, "succeeded")


class _PlainStore(BaseStore):
    def batch(self, ops: Any) -> list[Any]:
        return []

    async def abatch(self, ops: Any) -> list[Any]:
        return []


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda j: j.enqueue("has space", TENANT), "printable ASCII"),
        (lambda j: j.enqueue("doc\n", TENANT), "printable ASCII"),
        (lambda j: j.enqueue("https://user:pw@host/doc", TENANT), "carries credentials"),
        (lambda j: j.enqueue("https://host/doc?access_token=abc", TENANT), "carries credentials"),
        (
            lambda j: j.enqueue("https://maps.example.com/doc?key=AIzaSyA1234567890abcdef", TENANT),
            "carries credentials",
        ),
        (lambda j: j.enqueue("https://host/callback#access_token=abc", TENANT), "carries credentials"),
        (lambda j: j.enqueue("https://host/doc?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE", TENANT), "carries credentials"),
        (lambda j: j.enqueue("https://host/doc?private_key=x", TENANT), "carries credentials"),
        (lambda j: j.enqueue("ghp_16C7e42F292c6912E7710c838347Ae178B4a", TENANT), "carries credentials"),
        (lambda j: j.enqueue("doc-1", "acme"), "Expected a MemoryScope"),
        (lambda j: j.process_next(print, worker_id="bad id"), "worker_id"),
        (lambda j: j.process_next(print, worker_id="w", lease_seconds=0), "lease_seconds"),
        (lambda j: j.process_next(print, worker_id="w", lease_seconds=True), "lease_seconds"),
        (lambda j: j.get("j123"), "32 hex digits"),
    ],
)
def test_bad_input_is_refused_with_the_fix(call: Callable[[KnowledgeJobs], Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        call(KnowledgeJobs(InMemoryStore()))


def test_an_async_executor_in_the_sync_call_and_a_store_without_compare_and_swap_are_refused() -> None:
    async def execute(job: KnowledgeJob) -> None:
        return None

    jobs = KnowledgeJobs(InMemoryStore())
    jobs.enqueue("doc-1", TENANT)
    with pytest.raises(UserError, match="aprocess_next"):
        jobs.process_next(execute, worker_id="w")
    with pytest.raises(UserError, match="compare-and-swap"):
        KnowledgeJobs(_PlainStore())
    with pytest.raises(UserError, match="max_attempts"):
        KnowledgeJobs(InMemoryStore(), max_attempts=0)
