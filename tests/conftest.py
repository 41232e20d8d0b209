from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _services import Aimock, free_port, require_node_package, running, start_aimock, start_postgres

# Every variable that could make a test reach a real provider or change a default.
_SECRET_ENV = (
    "OPENROUTER_API_KEY",
    "OPENAI_API_KEY",
    "CHATGROQ_API_KEY",
    "GROQ_API_KEY",
    "TAVILY_API_KEY",
    "TYPESAFE_API_KEY",
    "ANTHROPIC_API_KEY",
    "SUPABASE_SERVICE_ROLE_KEY",
    "NEXT_PUBLIC_SUPABASE_ANON_KEY",
    "NEXT_PUBLIC_SUPABASE_URL",
    "AI_UTILS_PROVIDER",
    "AI_UTILS_MODEL",
    "OPENROUTER_BASE_URL",
    "OPENAI_BASE_URL",
    "GROQ_BASE_URL",
    "LOCAL_LLM_BASE_URL",
    "AI_UTILS_CLAUDE_CLI",
    "AI_UTILS_CODEX_CLI",
    "JEV_BASE_URL",
    "LANGSMITH_API_KEY",
    "LANGCHAIN_API_KEY",
    "LANGSMITH_TRACING",
    "LANGCHAIN_TRACING_V2",
)


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
    """URI of a real Postgres (with pgvector available) for this test session."""
    with start_postgres() as uri:
        yield uri


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
