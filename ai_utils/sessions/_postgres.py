"""``postgres_sessions``: durable sessions that any number of processes on any number of machines share.

Checkpoints use `langgraph-checkpoint-postgres` (our `PostgresCheckpointSaver`, one pool); the store's
tables live in the same database and pool. A checkpoint write for a leased session runs in one
transaction that first takes ``SELECT ... FOR KEY SHARE`` on the session row and checks the lease token, so
a takeover (an ``UPDATE`` of ``lease_token``, a key column) waits for it and a stale worker's write is
rolled back, while lease renewals and log writes (no key changes) never wait for a checkpoint.

Readers and workers in other processes are woken by ``LISTEN/NOTIFY``: each write that stores lines, a cancel
or a lease given back notifies channel ``ai_utils_sessions`` with the session id (inside the same statement,
delivered at commit), and each store keeps one listening connection (`_Listener`, a daemon thread) that
wakes this process's waiters. Polling stays as a slow fallback for a listener that lost its connection.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from ai_utils.memory.postgres import PostgresCheckpointSaver
from ai_utils.sessions._engine import steered
from ai_utils.sessions._fence import FENCE, FencedWrites, refused
from ai_utils.sessions._schema import ADDED_COLUMNS, SCHEMA, Cursor, SaverDb
from ai_utils.sessions._store import SessionStore, lease_seconds_of

__all__ = ["PostgresSessions", "postgres_sessions"]

logger = logging.getLogger("ai_utils.sessions")

_SETUP_KEY = 0x61695F73657373  # "ai_sess"
_TABLES = ("ai_utils_sessions", "ai_utils_inputs", "ai_utils_turns", "ai_utils_log", "ai_utils_calls")
CHANNEL = "ai_utils_sessions"
_CONTROL = "c|"  # payload prefix of a control notification (a cancel, an interrupting prompt, a lease given back)
_ENDS = "e|"  # payload prefix of the lines that end a turn (what result() waits for)
_STEER = "s|"  # payload prefix of a stored steer (a running turn looks for steers at its next model call)


class _FencedPostgresSaver(FencedWrites, PostgresCheckpointSaver):
    """`PostgresCheckpointSaver` whose writes for a leased session check the lease in the same transaction."""

    fresh_seconds = 1.0

    @contextlib.contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
        fence = FENCE.get()
        if fence is None:
            with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        from psycopg.errors import DivisionByZero
        from psycopg.rows import dict_row

        try:
            with self.pool.connection() as conn, _transaction(conn, implicit=True) as tx:
                # FOR KEY SHARE: a takeover changes lease_token, a key column (unique index), so it waits for this
                # write to commit; a lease renewal or a cursor update changes no key and need not wait. The token is
                # checked by the server, first in the transaction: a stale one fails the statement (division by
                # zero), the writes queued behind it are skipped and the COMMIT rolls back. Nothing is read back, so
                # the whole write is one round trip.
                tx.cur.execute(_SAVER_FENCE_CHECK, fence)
                with conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
        except DivisionByZero:
            raise refused(fence) from None


def _fence_check(placeholder: str, lock: str) -> str:
    """A statement that checks a lease on the server without reading anything back.

    1 while ``(session_id, lease_token)`` is the session's lease (its row locked with ``lock``), else division by zero.
    """
    return (
        f"SELECT 1 / COALESCE((SELECT 1 FROM ai_utils_sessions WHERE session_id = {placeholder} "
        f"AND lease_token = {placeholder} {lock}), 0)"
    )


_SAVER_FENCE_CHECK = _fence_check("%s", "FOR KEY SHARE")


class _Tx:
    """A write transaction in pipeline mode, whose block may end the pipeline itself (`commit_now`).

    ``implicit``: no ``BEGIN``/``COMMIT`` statements: the statements up to the pipeline's Sync are one implicit
    transaction (committed at the Sync; a failed statement makes the server skip the rest and roll it back), so
    nothing in the block may sync the pipeline early (no ``rowcount``, no nested pipeline or transaction).
    """

    def __init__(self, conn: Any, cur: Any, implicit: bool = False) -> None:
        self.conn, self.cur = conn, cur
        self.implicit = implicit
        self.committed = False
        self._pipeline: Any = None

    def begin(self) -> None:
        self._pipeline = self.conn.pipeline()  # entered and left by hand: `commit_now` leaves it early
        self._pipeline.__enter__()
        if not self.implicit:
            self.cur.execute("BEGIN")

    def commit_now(self) -> None:
        """Queue the COMMIT and leave the pipeline: one round trip, and the block's results are read locally after it.

        Reading a result inside the pipeline would cost a round trip (a flush) and leaving it another (its Sync).
        Raises what a statement of the transaction raised (the server skipped the rest: rolled back by the caller).
        """
        if not self.implicit:
            self.conn.cursor().execute("COMMIT")  # on a cursor of its own: a cursor keeps its last statement's result
        self.committed = True
        self.leave()

    def leave(self, error: BaseException | None = None) -> None:
        """Leave the pipeline (its Sync: all results come back) unless `commit_now` did."""
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            pipeline.__exit__(type(error) if error else None, error, error.__traceback__ if error else None)


@contextlib.contextmanager
def _transaction(conn: Any, *, implicit: bool = False) -> Iterator[_Tx]:
    """One transaction in pipeline mode: its statements go out together, one round trip up to the commit.

    Only reading a result inside the pipeline waits for the server (a flush, still inside the transaction).
    Committed at the end of the block unless the block committed itself (`_Tx.commit_now`); rolled back when it
    raises before that (or a statement failed).

    ``implicit`` (a block that never syncs the pipeline early, see `_Tx`): no ``BEGIN``/``COMMIT`` statements, the
    pipeline's Sync commits. A block that raises closes the connection instead of rolling back (the server rolls
    the open transaction back; the pool replaces the connection): psycopg's cache of prepared statements is not
    kept in step with a pipeline whose implicit transaction failed.
    """
    import psycopg
    from psycopg import pq
    from psycopg.rows import tuple_row

    # Outside autocommit psycopg opens a transaction itself that no Sync would commit: explicit statements then.
    implicit = implicit and bool(conn.autocommit)
    try:
        with conn.cursor(row_factory=tuple_row) as cur:
            tx = _Tx(conn, cur, implicit)
            tx.begin()
            try:
                yield tx
            except psycopg.Error as error:
                if implicit:
                    raise
                tx.leave(error)  # a statement failed: the server skips the rest; rolled back below
                raise
            except BaseException as error:
                if implicit:
                    raise
                # Rolled back below by `conn.rollback()`, never by a ROLLBACK queued in the pipeline: psycopg answers
                # that ROLLBACK's result by queueing DEALLOCATE ALL for after the connection's next statement, which
                # then drops the statement psycopg has just prepared and still counts on (InvalidSqlStatementName).
                tx.leave(error)
                raise
            if not tx.committed and not implicit:
                cur.execute("COMMIT")
            tx.leave()
    except BaseException:
        if implicit:
            conn.close()  # what was not committed the server rolls back
        elif conn.pgconn.transaction_status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR):
            conn.rollback()
        raise


class _PgCursor:
    """A psycopg cursor taking ``?`` placeholders (the store's SQL is shared with SQLite)."""

    def __init__(self, cur: Any, tx: _Tx | None = None) -> None:
        self._cur = cur
        self._tx = tx

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._cur.execute(sql.replace("?", "%s"), tuple(params))

    def commit_early(self) -> None:
        """Commit now: the results read after it came back with the commit, one round trip (see `_Tx.commit_now`)."""
        if self._tx is not None:
            self._tx.commit_now()

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def another(self) -> _PgCursor:
        """A second cursor on the same connection (and transaction)."""
        return _PgCursor(self._cur.connection.cursor(row_factory=self._cur.row_factory), self._tx)

    def fetchall(self) -> list[Any]:
        return list(self._cur.fetchall())

    @property
    def rowcount(self) -> int:
        self._results()
        return int(self._cur.rowcount)

    @property
    def description(self) -> Any:
        self._results()
        return self._cur.description

    def _results(self) -> None:
        """In pipeline mode: wait for the results of the statements sent so far."""
        pipeline = self._cur.connection._pipeline
        if pipeline is not None:
            if self._tx is not None and self._tx.implicit and not self._tx.committed:
                raise RuntimeError("rowcount/description would commit an implicit transaction early")
            pipeline.sync()


class _PgDb(SaverDb[_FencedPostgresSaver]):
    """The store's `Db` on the saver's connection pool."""

    for_update = " FOR UPDATE"
    notify = f"pg_notify('{CHANNEL}', session_id)"
    notify_control = f"pg_notify('{CHANNEL}', '{_CONTROL}' || session_id)"
    notify_ends = f"pg_notify('{CHANNEL}', '{_ENDS}' || session_id)"
    notify_steer = f"pg_notify('{CHANNEL}', '{_STEER}' || session_id)"
    fence_check = _fence_check("?", "FOR UPDATE")  # the store's writes update the row they lock
    claim_reads_holder = True
    writes_with = True

    def __init__(self, saver: _FencedPostgresSaver, conn_string: str) -> None:
        from psycopg.errors import DivisionByZero

        super().__init__(saver)
        self.fence_errors = (DivisionByZero,)
        self.conn_string = conn_string
        self._keeper_lock = threading.Lock()
        self._keeper_conn: Any = None

    @contextlib.contextmanager
    def write(self) -> Iterator[Cursor]:
        with self.saver.pool.connection() as conn, _transaction(conn) as tx:
            yield _PgCursor(tx.cur, tx)

    @contextlib.contextmanager
    def batch(self) -> Iterator[Cursor]:
        with self.saver.pool.connection() as conn, _transaction(conn, implicit=True) as tx:
            yield _PgCursor(tx.cur, tx)

    @contextlib.contextmanager
    def read(self) -> Iterator[Cursor]:
        from psycopg.rows import tuple_row

        with self.saver.pool.connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
            yield _PgCursor(cur)

    def setup(self, statements: Sequence[str]) -> None:
        """Create the store's tables unless they are all there already (any other statements: as `SaverDb`).

        Checked first with a plain read: ``CREATE INDEX IF NOT EXISTS`` locks its table even when the index exists,
        which deadlocks against the turns of workers already running (a worker joining a busy cluster).
        """
        if statements is not SCHEMA:  # another schema on the same database (the server's owner rows)
            super().setup(statements)
            return
        names = [*_TABLES, "ai_utils_turns_open", "ai_utils_sessions_lease"]
        added = [(t, c) for t, cols in ADDED_COLUMNS.items() for c in cols]
        with self.read() as cur:
            cur.execute(
                "SELECT " + " AND ".join(["to_regclass(?) IS NOT NULL"] * len(names)) + ", (SELECT count(*) FROM "
                "information_schema.columns WHERE table_schema = current_schema() AND (table_name, column_name) IN ("
                + ", ".join(["(?, ?)"] * len(added))
                + "))",
                (*names, *(x for pair in added for x in pair)),
            )
            present, columns = cur.fetchone()
        if not (present and columns == len(added)):
            super().setup(statements)

    def lock_setup(self, cur: Cursor) -> None:
        """Concurrent ``CREATE TABLE IF NOT EXISTS`` race in Postgres: one setup at a time, per database."""
        cur.execute("SELECT pg_advisory_xact_lock(?)", (_SETUP_KEY,))

    @contextlib.contextmanager
    def keeper(self) -> Iterator[Cursor]:
        """A write transaction on a connection of the keeper's own.

        A pool busy with a hundred turns must not delay a lease renewal until the lease runs out (a takeover of
        a live worker).
        """
        import psycopg
        from psycopg.rows import tuple_row

        with self._keeper_lock:
            conn = self._keeper_conn
            if conn is None or conn.closed:
                conn = self._keeper_conn = psycopg.connect(self.conn_string, row_factory=tuple_row)
            try:
                with conn.transaction(), conn.cursor() as cur:
                    yield _PgCursor(cur)
            except psycopg.OperationalError:
                conn.close()  # reconnect next time
                raise

    def close(self) -> None:
        with self._keeper_lock:
            if self._keeper_conn is not None:
                self._keeper_conn.close()


class _Listener:
    """One ``LISTEN`` connection (a daemon thread) that wakes this process's waiters on other processes' writes."""

    def __init__(self, conn_string: str, signal: Any) -> None:
        self._conn_string = conn_string
        self._signal = signal
        self._stop = threading.Event()
        self.ready = threading.Event()
        self.live = threading.Event()  # set while listening (a lost connection misses notifications)
        self._thread = threading.Thread(target=self._run, name="ai_utils-sessions-listen", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psycopg

        from ai_utils.sessions._engine import control, steered, turn_ends

        delay = 0.1
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conn_string, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.live.set()
                    if self.ready.is_set():
                        self._signal.publish_all()  # back after a lost connection: what it missed, all look again
                    self.ready.set()
                    delay = 0.1
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            payload = note.payload
                            if payload.startswith(_CONTROL):
                                self._signal.publish(control(payload[len(_CONTROL) :]))
                            elif payload.startswith(_STEER):
                                self._signal.publish(steered(payload[len(_STEER) :]))
                            elif payload.startswith(_ENDS):
                                self._signal.publish(payload[len(_ENDS) :])
                                self._signal.publish(turn_ends(payload[len(_ENDS) :]))
                            else:
                                self._signal.publish(payload)
            except Exception as error:  # the server went away: readers fall back to polling meanwhile
                self.live.clear()
                if self._stop.is_set():
                    return
                logger.warning("Session listener lost its connection (%s); reconnecting", type(error).__name__)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


class PostgresSessions(SessionStore):
    """Durable sessions in Postgres (see `postgres_sessions`)."""

    _listener: _Listener | None = None
    _conn_string: str = ""

    def _started(self, engine: Any) -> None:
        self._listener = _Listener(self._conn_string, engine.signal)
        self._listener.ready.wait(5)  # readers that start now must not miss a wake-up (polling covers a miss)

    def steer_version(self, session_id: str) -> Any:
        """The session's steer signal ``(epoch, version)`` while the listener hears every process's steers."""
        listener = self._listener
        if listener is None or not listener.live.is_set():
            return None
        signal = self.engine.signal
        return signal.epoch, signal.version(steered(session_id))

    def close(self) -> None:
        """Stop this worker's background runner and listener, and close the pool."""
        if self._engine is not None:
            self._engine.close()
        if self._listener is not None:
            self._listener.close()
        self.db.close()  # type: ignore[attr-defined]
        self.checkpointer.close()


def postgres_sessions(
    conn_string: str, *, lease_seconds: float = 30.0, min_size: int = 1, max_size: int = 4
) -> PostgresSessions:
    """Durable sessions in Postgres: processes on any number of machines share them (scale-out).

    Args:
        conn_string: a libpq URI or ``key=value`` string (never shown in errors).
        lease_seconds: how long a worker's claim on a session lasts without renewal.
        min_size: connections the pool keeps open.
        max_size: the most connections the pool opens.

    Raises:
        UserError: a bad connection string or pool size, or the server cannot be reached.
    """
    lease_seconds_of(lease_seconds)  # before the pool connects
    saver = _FencedPostgresSaver(conn_string, min_size=min_size, max_size=max_size)
    # Woken by NOTIFY: the polls are only a fallback for a listener that lost its connection.
    store = PostgresSessions(
        _PgDb(saver, conn_string),
        saver,
        lease_seconds=lease_seconds,
        kind="postgres",
        poll_seconds=0.5,
        control_seconds=1.0,
    )
    store._conn_string = conn_string
    saver.leases = store.leases
    return store
