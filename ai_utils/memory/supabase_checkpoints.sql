-- Tables for ai_utils.memory.SupabaseCheckpointSaver (default table="checkpoints").
-- Run once in the Supabase SQL editor (or psql). For another table name use
-- ai_utils.memory.supabase.supabase_checkpoints_sql(table="..."), which renames every object below.
-- Keys use the "C" collation so ordering matches LangGraph's (byte order).
-- Blobs hold LangGraph's serializer output (type + base64 bytes); metadata is JSON for filtering.

create table if not exists public.checkpoints (
    thread_id text collate "C" not null,
    checkpoint_ns text collate "C" not null default '',
    checkpoint_id text collate "C" not null,
    parent_checkpoint_id text,
    checkpoint_type text not null,
    checkpoint_data text not null,
    metadata jsonb not null default '{}'::jsonb,
    created_at timestamptz not null default now(),
    primary key (thread_id, checkpoint_ns, checkpoint_id)
);

create table if not exists public.checkpoints_writes (
    thread_id text collate "C" not null,
    checkpoint_ns text collate "C" not null default '',
    checkpoint_id text collate "C" not null,
    task_id text collate "C" not null,
    task_path text collate "C" not null default '',
    idx integer not null,
    channel text not null,
    value_type text not null,
    value_data text not null,
    primary key (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);

create index if not exists checkpoints_metadata_idx on public.checkpoints using gin (metadata jsonb_path_ops);

-- Only the service role (server side) may read or write conversations: RLS on, no policies.
alter table public.checkpoints enable row level security;
alter table public.checkpoints_writes enable row level security;
revoke all on public.checkpoints, public.checkpoints_writes from anon, authenticated;
grant select, insert, update, delete on public.checkpoints, public.checkpoints_writes to service_role;

notify pgrst, 'reload schema';
