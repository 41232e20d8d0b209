"""Offline test services: real processes on free 127.0.0.1 ports, started and stopped by fixtures.

Each service fails loudly (never skips) when the machine lacks it, with the command that installs it.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

SERVICES_DIR = Path(__file__).parent / "services"
NODE_MODULES = SERVICES_DIR / "node_modules"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require_node_package(relative: str) -> Path:
    """Path of a file inside tests/services/node_modules, or fail with the install command."""
    path = NODE_MODULES / relative
    if shutil.which("node") is None:
        pytest.fail("Node.js is missing: install Node 20 + npm (apt-get install nodejs npm), then `./scripts/test`.")
    if not path.exists():
        pytest.fail(f"{path} is missing: run `cd tests/services && npm ci` (./scripts/test does it for you).")
    return path


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Terminate ``proc``, killing it if it has not exited after 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_http(url: str, *, timeout: float = 60.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"service for {url} exited early with code {proc.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.05)
    raise RuntimeError(f"service at {url} did not become ready in {timeout}s: {last!r}")


@contextmanager
def running(
    cmd: Sequence[str], *, ready_url: str, env: Mapping[str, str] | None = None, timeout: float = 60.0
) -> Iterator[None]:
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    try:
        try:
            wait_http(ready_url, timeout=timeout, proc=proc)
        except RuntimeError:
            log.seek(0)
            raise RuntimeError(f"{cmd[0]} failed to start:\n{log.read().decode(errors='replace')[-4000:]}") from None
        yield
    finally:
        stop_process(proc)
        log.close()


class Aimock:
    """Handle on a running aimock (OpenAI-compatible fake LLM server, real HTTP)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.openai_base_url = f"{root}/v1"
        self.openrouter_base_url = f"{root}/api/v1"

    def reset(self) -> None:
        httpx.post(f"{self.root}/__aimock/reset", timeout=5).raise_for_status()

    def add(self, *fixtures: Mapping[str, Any]) -> None:
        """Add aimock fixtures: ``{"match": {...}, "response": {...}}``."""
        r = httpx.post(f"{self.root}/__aimock/fixtures", json={"fixtures": list(fixtures)}, timeout=5)
        r.raise_for_status()

    def journal(self) -> list[dict[str, Any]]:
        """Requests aimock received since the last reset, oldest first."""
        r = httpx.get(f"{self.root}/__aimock/journal", timeout=5)
        r.raise_for_status()
        entries: list[dict[str, Any]] = r.json()
        return entries

    def request_bodies(self) -> list[dict[str, Any]]:
        out = []
        for entry in self.journal():
            body = entry.get("body")
            out.append(json.loads(body) if isinstance(body, str) else body)
        return out


@contextmanager
def start_aimock() -> Iterator[Aimock]:
    cli = require_node_package("@copilotkit/aimock/dist/cli.js")
    port = free_port()
    fixtures_dir = tempfile.mkdtemp(prefix="aimock-")
    root = f"http://127.0.0.1:{port}"
    cmd = ["node", str(cli), "-p", str(port), "-h", "127.0.0.1", "-f", fixtures_dir, "--log-level", "silent"]
    try:
        with running(cmd, ready_url=f"{root}/__aimock/health"):
            yield Aimock(root)
    finally:
        shutil.rmtree(fixtures_dir, ignore_errors=True)


PG_ROOT = Path("/usr/lib/postgresql")
INSTALL_POSTGRES = SERVICES_DIR / "install_postgres.sh"

# The pgvector code paths the suite uses: casts, an HNSW build and search, the three distances, halfvec. Its
# statements leave the server as initdb made it (a rolled-back transaction); the search must find row 7 first.
PGVECTOR_PROBE: tuple[str, ...] = (
    "CREATE EXTENSION IF NOT EXISTS vector",
    "SELECT (SELECT array_agg(random())::vector(384) FROM generate_series(1, 384))",
    "CREATE TEMP TABLE pgvector_probe (id int, v vector(384))",
    "INSERT INTO pgvector_probe SELECT i, (SELECT array_agg(sin(i * j))::vector(384) FROM generate_series(1, 384) j)"
    " FROM generate_series(1, 200) i",
    "CREATE INDEX ON pgvector_probe USING hnsw (v vector_cosine_ops)",
    "SET enable_seqscan = off",
    "SELECT min(v <-> v), min(v <#> v), min(v::halfvec(384) <=> v::halfvec(384)) FROM pgvector_probe",
    "SELECT id AS nearest FROM pgvector_probe ORDER BY v <=> (SELECT v FROM pgvector_probe WHERE id = 7) LIMIT 3",
)


class PgvectorUnavailable(RuntimeError):
    """The test Postgres cannot run pgvector on this machine (a backend crashed running the probe)."""


def postgres_bindir() -> Path:
    """``bin/`` of the newest Debian Postgres that has pgvector, or fail with the install command."""
    for version in sorted((p.name for p in PG_ROOT.glob("*")), key=lambda v: int(v) if v.isdigit() else -1)[::-1]:
        home = PG_ROOT / version
        if (home / "bin" / "postgres").exists() and (home / "lib" / "vector.so").exists():
            return home / "bin"
    pytest.fail(
        f"Postgres + pgvector for the tests are missing under {PG_ROOT}: run `./scripts/test` "
        f"(or, as root, `{INSTALL_POSTGRES}`)."
    )


def _run_as() -> dict[str, Any]:
    """initdb and postgres refuse to run as root: as root, run them as ``nobody``."""
    if os.geteuid() != 0:
        return {}
    return {"user": "nobody", "group": grp.getgrgid(pwd.getpwnam("nobody").pw_gid).gr_name, "extra_groups": []}


def _initdb(bindir: Path, home: Path, run_as: Mapping[str, Any]) -> Path:
    """A fresh cluster in ``home/data`` (superuser ``postgres``, trust auth); ``home`` is handed to ``run_as``."""
    if run_as:
        os.chown(home, pwd.getpwnam(run_as["user"]).pw_uid, grp.getgrnam(run_as["group"]).gr_gid)
    datadir = home / "data"
    cmd = [str(bindir / "initdb"), "-D", str(datadir), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"]
    done = subprocess.run([*cmd, "--no-sync"], capture_output=True, **run_as)
    if done.returncode != 0:
        raise RuntimeError(f"initdb failed:\n{(done.stdout + done.stderr).decode(errors='replace')}")
    return datadir


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {flag for line in text.splitlines() if line.startswith("flags") for flag in line.split(":", 1)[1].split()}


def _probe_pgvector(uri: str, log_path: Path, probe: Sequence[str]) -> None:
    import psycopg

    try:
        with psycopg.connect(uri) as conn:
            for statement in probe:
                cur = conn.execute(statement)
            nearest = cur.fetchone() if cur.description else None
            conn.rollback()
    except psycopg.Error as exc:
        crash = ""
        deadline = time.monotonic() + 5
        while not crash and time.monotonic() < deadline:
            # The postmaster logs how the backend died just after the client saw its connection drop.
            crash = next((line for line in log_path.read_text(errors="replace").splitlines() if "signal" in line), "")
            time.sleep(0.05)
        if "signal 4" in crash or "Illegal instruction" in crash:
            flags = _cpu_flags()
            has = ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in ("avx2", "fma", "avx512f"))
            raise PgvectorUnavailable(
                f"The test Postgres cannot run pgvector on this CPU ({has}): a backend died with SIGILL "
                f"(server log: {crash.strip()!r}), so its vector.so uses instructions this CPU lacks. Reinstall "
                f"the portable build: as root, `rm -f /usr/share/postgresql/*/extension/vector.ai-utils-portable "
                f"&& {INSTALL_POSTGRES}` (see tests/services/README.md)."
            ) from None
        detail = crash or log_path.read_text(errors="replace")[-3000:]
        raise PgvectorUnavailable(f"The test Postgres failed the pgvector probe: {exc}\n{detail}") from None
    if probe == PGVECTOR_PROBE and nearest != (7,):
        raise PgvectorUnavailable(f"pgvector's HNSW search answered {nearest!r} for row 7's own vector, not 7.")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # SIGINT is Postgres' fast shutdown (SIGTERM would wait for every client to disconnect); SIGQUIT is immediate.
    for sig, wait in ((signal.SIGINT, 15), (signal.SIGQUIT, 5)):
        if proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            pass
    proc.kill()
    proc.wait()


@contextmanager
def start_postgres(*, probe: Sequence[str] = PGVECTOR_PROBE) -> Iterator[str]:
    """A real Postgres (Debian's server) + pgvector built for any x86-64 CPU, in a temp dir.

    Yields a libpq URI for superuser ``postgres`` on database ``postgres`` over the Unix socket
    (``postgresql://postgres@/postgres?host=<dir>&port=<port>``); it also listens on 127.0.0.1:<port>.
    The server is a direct child of this process (as ``nobody`` under root), stopped and deleted on exit.
    Before yielding it runs ``probe`` and raises ``PgvectorUnavailable`` if that crashes a backend.
    """
    import psycopg

    bindir = postgres_bindir()
    run_as = _run_as()
    home = Path(tempfile.mkdtemp(prefix="pg-"))
    log_path = home / "postgres.log"
    proc: subprocess.Popen[bytes] | None = None
    try:
        datadir = _initdb(bindir, home, run_as)
        port = free_port()
        cmd = [str(bindir / "postgres"), "-D", str(datadir), "-k", str(home), "-h", "127.0.0.1", "-p", str(port)]
        # A throwaway server: durability costs time and buys nothing.
        cmd += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        with log_path.open("wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, **run_as)
        uri = f"postgresql://postgres@/postgres?host={home}&port={port}"
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not start:\n{log_path.read_text(errors='replace')[-3000:]}")
            try:
                psycopg.connect(uri, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                time.sleep(0.05)
        _probe_pgvector(uri, log_path, probe)
        yield uri
    finally:
        if proc is not None:
            _stop(proc)
        shutil.rmtree(home, ignore_errors=True)


def pgvector_probe_on_cpu(cpu: str) -> tuple[int, str]:
    """Run ``PGVECTOR_PROBE`` in single-user Postgres under ``qemu-x86_64 -cpu <cpu>``: (exit code, output).

    An emulated CPU shows whether vector.so needs instructions that CPU lacks (QEMU raises SIGILL on them), on
    whatever CPU this machine has. Single-user mode, because qemu-user crashes the server's forked backends.
    """
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        pytest.fail("qemu-x86_64 is missing: run `./scripts/test` (or `apt-get install qemu-user`).")
    # qemu-user itself rarely crashes the emulated server with SIGSEGV (once in ~50 runs on a loaded CI box; the
    # same probe passed the 42 runs around it), so a SIGSEGV reported by qemu is retried twice. SIGILL, what this
    # probe exists to catch, and any other failure are returned at once.
    for _ in range(3):
        code, output = _pgvector_probe_under_qemu(qemu, cpu)
        if not (code == -signal.SIGSEGV and "qemu: uncaught target signal 11" in output):
            break
    return code, output


def _pgvector_probe_under_qemu(qemu: str, cpu: str) -> tuple[int, str]:
    bindir = postgres_bindir()
    run_as = _run_as()
    home = Path(tempfile.mkdtemp(prefix="pg-emulated-"))
    try:
        datadir = _initdb(bindir, home, run_as)
        # -j: a statement ends with a semicolon and an empty line.
        script = "".join(f"{statement};\n\n" for statement in PGVECTOR_PROBE)
        cmd = [qemu, "-cpu", cpu, str(bindir / "postgres"), "--single", "-j", "-D", str(datadir), "postgres"]
        done = subprocess.run(cmd, input=script.encode(), capture_output=True, timeout=300, **run_as)
        return done.returncode, (done.stdout + done.stderr).decode(errors="replace")
    finally:
        shutil.rmtree(home, ignore_errors=True)
