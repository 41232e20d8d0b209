from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from _services import (
    Aimock,
    PgvectorUnavailable,
    free_port,
    require_node_package,
    running,
    start_aimock,
    start_postgres,
)
from _supabase import SupabaseStack, start_supabase
from starlette.types import ASGIApp
from supabase import Client, ClientOptions, create_client

# Every variable that could make a test reach a real provider or change a default.
_SECRET_ENV = (
    "OPENROUTER_API_KEY",
    "OPENAI_API_KEY",
    "CHATGROQ_API_KEY",
    "GROQ_API_KEY",
    "TAVILY_API_KEY",
    "TYPESAFE_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "DEEPSEEK_API_KEY",
    "SUPABASE_SERVICE_ROLE_KEY",
    "NEXT_PUBLIC_SUPABASE_ANON_KEY",
    "NEXT_PUBLIC_SUPABASE_URL",
    "AI_UTILS_PROVIDER",
    "AI_UTILS_MODEL",
    "OPENROUTER_BASE_URL",
    "OPENAI_BASE_URL",
    "GROQ_BASE_URL",
    "LOCAL_LLM_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_URL",
    "GEMINI_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "DEEPSEEK_BASE_URL",
    "DEEPSEEK_API_BASE",
    "OPENAI_ORG_ID",
    "OPENAI_ORGANIZATION",
    "OPENAI_PROJECT_ID",
    "LANGSMITH_GATEWAY",
    "LANGSMITH_GATEWAY_API_KEY",
    "AI_UTILS_CLAUDE_CLI",
    "AI_UTILS_CODEX_CLI",
    "JEV_BASE_URL",
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LANGSMITH_TRACING",
    "LANGCHAIN_TRACING_V2",
)


@pytest.fixture(scope="session", autouse=True)
def _unmeasured_child_processes() -> None:
    """The processes tests start run without coverage, as they always did, also inside pytest-xdist workers.

    ``patch = ["subprocess"]`` (pyproject) hands coverage's settings to child processes through this variable so the
    xdist workers are measured; a measured helper process would start about 1.5x slower, and the suite starts hundreds.
    """
    os.environ.pop("COVERAGE_PROCESS_CONFIG", None)


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may see a real key or a user's provider settings."""
    for name in _SECRET_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def _aimock_server() -> Iterator[Aimock]:
    with start_aimock() as server:
        yield server


@pytest.fixture
def aimock(_aimock_server: Aimock) -> Aimock:
    """A real OpenAI-compatible fake server, emptied of fixtures and journal for this test."""
    _aimock_server.reset()
    return _aimock_server


@pytest.fixture(scope="session")
def postgres_uri() -> Iterator[str]:
    """URI of a real Postgres for this test session: superuser ``postgres``, ``CREATE EXTENSION vector`` works.

    ``postgresql://postgres@/postgres?host=<socket dir>&port=<port>`` (tests/_services.py ``start_postgres``).
    A server that cannot run pgvector on this CPU stops the whole run with one message, not one error per test.
    """
    try:
        with start_postgres() as uri:
            yield uri
    except PgvectorUnavailable as exc:
        pytest.exit(str(exc), returncode=pytest.ExitCode.TESTS_FAILED)


@pytest.fixture(scope="session")
def everything_js() -> Path:
    """The server-everything entry point (``node <path> stdio|streamableHttp``)."""
    return require_node_package("@modelcontextprotocol/server-everything/dist/index.js")


@pytest.fixture(scope="session")
def everything_url(everything_js: Path) -> Iterator[str]:
    """server-everything over streamable HTTP, held to 127.0.0.1 by a preload (it has no host option)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    preload = str(Path(__file__).parent / "services" / "loopback.cjs")
    cmd = ["node", "--require", preload, str(everything_js), "streamableHttp"]
    with running(cmd, ready_url=url, env={"PORT": str(port)}):
        yield url


COUNTER_SERVER = Path(__file__).parent / "tools" / "mcp_servers" / "counter_server.py"


@pytest.fixture(scope="session")
def counter_url() -> Iterator[str]:
    """Our stateful FastMCP counter server over streamable HTTP; ``GET <root>/_closed`` lists closed sessions."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with running([sys.executable, str(COUNTER_SERVER), "http", str(port)], ready_url=url):
        yield url


class LiveServer:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url


@pytest.fixture
def serve() -> Iterator[Callable[[ASGIApp], LiveServer]]:
    """Run ASGI apps on a real uvicorn server on 127.0.0.1 (free port), stopped after the test."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(app: ASGIApp) -> LiveServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, lifespan="off", log_level="warning", ws="none", access_log=False)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        servers.append((server, thread))
        return LiveServer(f"http://127.0.0.1:{port}")

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def supabase_stack(postgres_uri: str) -> Iterator[SupabaseStack]:
    """Real PostgREST 12 + Postgres behind a /rest/v1 proxy on 127.0.0.1 (see tests/_supabase.py)."""
    with start_supabase(postgres_uri) as stack:
        yield stack


@pytest.fixture(scope="session")
def supabase_client(supabase_stack: SupabaseStack) -> Iterator[Client]:
    """A supabase-py client with the service role key.

    An explicit httpx client avoids supabase-py's DeprecationWarning for its default `timeout` path.
    """
    with httpx.Client(timeout=30) as http:
        yield create_client(supabase_stack.url, supabase_stack.service_key, options=ClientOptions(httpx_client=http))


@pytest.fixture(autouse=True)
async def _close_loop_resources() -> AsyncIterator[None]:
    """Close pooled HTTP clients bound to this test's event loop, as an app closes them at shutdown."""
    yield
    from ai_utils._loop_resources import aclose_loop_resources

    await aclose_loop_resources()
