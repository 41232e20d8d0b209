"""The offline services the suite relies on really start and answer."""

from __future__ import annotations

import httpx
from _services import Aimock


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
