from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _supabase import SupabaseStack
from supabase import Client

from ai_utils.memory.supabase import SupabaseCheckpointSaver, supabase_checkpoints_sql

CHECKPOINT_TABLE = "test_checkpoints"


@dataclass
class SupabaseCheckpoints:
    stack: SupabaseStack
    client: Client
    table: str

    def truncate(self) -> None:
        with psycopg.connect(self.stack.db_uri, autocommit=True) as conn:
            conn.execute(f"truncate {self.table}, {self.table}_writes")

    def fresh_saver(self) -> SupabaseCheckpointSaver:
        """A saver over emptied tables."""
        self.truncate()
        return SupabaseCheckpointSaver(self.client, table=self.table)


@pytest.fixture(scope="session")
def _supabase_checkpoint_tables(supabase_stack: SupabaseStack, supabase_client: Client) -> SupabaseCheckpoints:
    supabase_stack.run_sql(supabase_checkpoints_sql(CHECKPOINT_TABLE), wait_for=CHECKPOINT_TABLE)
    supabase_stack.wait_for_table(f"{CHECKPOINT_TABLE}_writes")
    return SupabaseCheckpoints(supabase_stack, supabase_client, CHECKPOINT_TABLE)


@pytest.fixture
def supabase_checkpoints(_supabase_checkpoint_tables: SupabaseCheckpoints) -> SupabaseCheckpoints:
    """The shipped checkpoint tables on the real stack, emptied for this test."""
    _supabase_checkpoint_tables.truncate()
    return _supabase_checkpoint_tables


AGENT_PROC = Path(__file__).parent / "_agent_proc.py"


class AgentProcess:
    """Runs tests/memory/_agent_proc.py (one agent turn with `durability="sync"`) in a fresh interpreter."""

    def run(self, backend: str, thread: str, user: str | None, responses: list[Any]) -> dict[str, Any]:
        args = {"backend": backend, "thread": thread, "user": user, "responses": responses}
        proc = subprocess.run(
            [sys.executable, str(AGENT_PROC), json.dumps(args)], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result

    def run_until_killed(self, backend: str, thread: str, user: str, responses: list[Any], tmp: Path) -> None:
        """Start a turn whose tool blocks, wait until the tool runs, then SIGKILL the process."""
        ready = tmp / f"ready-{thread}"
        args = {"backend": backend, "thread": thread, "user": user, "responses": responses, "ready_file": str(ready)}
        proc = subprocess.Popen(
            [sys.executable, str(AGENT_PROC), json.dumps(args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 60
            while not ready.exists():
                assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
                assert time.monotonic() < deadline, "the tool never started"
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL


@pytest.fixture
def agent_process() -> AgentProcess:
    return AgentProcess()


@pytest.fixture
def postgres_db(postgres_uri: str) -> Iterator[str]:
    """URI of a fresh, empty database on the session's Postgres server (dropped afterwards)."""
    name = f"mem_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        conn.execute(f"create database {name}")
    yield postgres_uri.replace("/postgres?", f"/{name}?")
    with psycopg.connect(postgres_uri, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")
