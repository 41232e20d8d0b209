"""The offline services the suite relies on really start and answer."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import httpx
import pytest
from _services import Aimock, PgvectorUnavailable, pgvector_probe_on_cpu, start_postgres


def test_aimock_serves_a_chat_completion_over_http(aimock: Aimock) -> None:
    aimock.add({"match": {"userMessage": "ping"}, "response": {"content": "pong"}})
    r = httpx.post(
        f"{aimock.openai_base_url}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "ping"}]},
        headers={"Authorization": "Bearer x"},
    )
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] == "pong"
    assert [b["messages"][0]["content"] for b in aimock.request_bodies()] == ["ping"]


def test_postgres_has_pgvector_and_answers_cosine_queries(postgres_uri: str) -> None:
    import psycopg

    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE TABLE svc_docs (content text, embedding vector(3))")
        conn.execute("INSERT INTO svc_docs VALUES ('a', '[1,0,0]'), ('b', '[0,1,0]'), ('c', '[1,0.1,0]')")
        rows = conn.execute(
            "SELECT content FROM svc_docs ORDER BY embedding <=> %s::vector LIMIT 2", ("[1,0,0]",)
        ).fetchall()
    assert [r[0] for r in rows] == ["a", "c"]


def test_postgres_uri_is_a_superuser_on_a_unix_socket_and_on_loopback_tcp(postgres_uri: str) -> None:
    import psycopg

    assert postgres_uri.startswith("postgresql://postgres@/postgres?host=/")
    port = dict(p.split("=", 1) for p in postgres_uri.split("?", 1)[1].split("&"))["port"]
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        assert row == (True,)
        assert conn.execute("SELECT inet_server_addr()::text").fetchone() == ("127.0.0.1/32",)


@pytest.mark.parametrize(
    "cpu",
    [
        "Nehalem",  # x86-64 with SSE4.2 only: no AVX, AVX2, FMA or AVX-512
        "EPYC-Rome",  # AVX2 + FMA but no AVX-512: the kind of host where the old pgvector wheel died with SIGILL
    ],
)
def test_pgvector_builds_and_searches_an_hnsw_index_on_an_emulated_older_cpu(cpu: str) -> None:
    code, output = pgvector_probe_on_cpu(cpu)
    assert "Illegal instruction" not in output
    assert code == 0, output[-3000:]
    assert re.findall(r'nearest = "(\d+)"', output)[0] == "7", output[-3000:]


def _orphaned_postgres_processes(tmp: Path) -> list[str]:
    """Processes still running on a data directory under ``tmp/pg-*`` that no longer exists."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = [arg.decode(errors="replace") for arg in cmdline.read_bytes().split(b"\0")]
        except OSError:
            continue
        if any(arg.startswith(f"{tmp}/pg-") and arg.endswith("/data") and not Path(arg).exists() for arg in args):
            found.append(" ".join(args))
    return found


def test_a_backend_killed_by_sigill_stops_the_test_postgres_with_a_message_that_names_the_cpu_and_the_fix() -> None:
    tmp = Path(tempfile.gettempdir())
    before = set(tmp.glob("pg-*"))
    # A real SIGILL to the backend running the probe, as a vector.so built for a newer CPU would raise.
    crashing_probe = ("CREATE TEMP TABLE t (x int)", "COPY t FROM PROGRAM 'kill -ILL $PPID'")
    with pytest.raises(PgvectorUnavailable) as raised:
        with start_postgres(probe=crashing_probe):
            pass
    message = str(raised.value)
    assert "cannot run pgvector on this CPU" in message
    assert "SIGILL" in message and "signal 4: Illegal instruction" in message
    assert all(f"{flag} yes" in message or f"{flag} no" in message for flag in ("avx2", "fma", "avx512f"))
    assert "install_postgres.sh" in message
    # The crashed server was stopped and its directory removed.
    assert set(tmp.glob("pg-*")) - before == set()
    assert _orphaned_postgres_processes(tmp) == []
