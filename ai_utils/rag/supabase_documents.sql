-- Documents for ai_utils' Supabase vector store (create_supabase_vector_store / get_supabase_vector_store).
-- Run once in the Supabase SQL editor or with psql. For another table, RPC name or vector size use
-- ai_utils.rag.supabase_documents_sql(table_name=..., rpc_function=..., dimension=...).
-- 384 = the local e5-small model; text-embedding-3-small gives 1536.

create extension if not exists vector;

create table if not exists public.documents (
  id text primary key default gen_random_uuid()::text,
  content text not null,
  metadata jsonb not null default '{}'::jsonb,
  embedding vector(384) not null
);

-- Cosine distance, matching the match function's `<=>` operator.
create index if not exists documents_embedding_idx on public.documents using hnsw (embedding vector_cosine_ops);
-- Serves `metadata @> filter` (e.g. one tenant's rows).
create index if not exists documents_metadata_idx on public.documents using gin (metadata jsonb_path_ops);

-- Only the service role (which bypasses RLS) can read or write; add policies to open it up.
alter table public.documents enable row level security;

-- `filter` is matched by containment: {"company_id": "c1"} returns only rows whose metadata holds that pair.
-- With a filter, HNSW keeps scanning until it found `match_count` matching rows (pgvector >= 0.8).
create or replace function public.match_documents(
  query_embedding vector(384),
  match_count int default 4,
  filter jsonb default '{}'::jsonb
)
returns table (id text, content text, metadata jsonb, similarity double precision)
language sql stable
set hnsw.iterative_scan = strict_order
as $$
  select d.id, d.content, d.metadata, 1 - (d.embedding <=> query_embedding) as similarity
  from public.documents d
  where d.metadata @> filter
  order by d.embedding <=> query_embedding
  limit match_count;
$$;
