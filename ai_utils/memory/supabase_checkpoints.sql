-- Tables and functions for ai_utils.memory.SupabaseCheckpointSaver (default table="checkpoints").
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

-- One round trip per put and per get_tuple: SupabaseCheckpointSaver calls these two functions over
-- PostgREST's /rpc. They run with the caller's rights (security invoker), so the grants and RLS above
-- still decide who may read or write; only the service role may call them.
create or replace function public.checkpoints_put(
    p_thread_id text,
    p_checkpoint_ns text,
    p_checkpoint_id text,
    p_parent_checkpoint_id text,
    p_checkpoint_type text,
    p_checkpoint_data text,
    p_metadata jsonb
) returns void
language sql
security invoker
set search_path = ''
as $$
    insert into public.checkpoints as c (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type, checkpoint_data, metadata
    )
    values (
        p_thread_id, p_checkpoint_ns, p_checkpoint_id, p_parent_checkpoint_id, p_checkpoint_type,
        p_checkpoint_data, p_metadata
    )
    on conflict (thread_id, checkpoint_ns, checkpoint_id) do update set
        parent_checkpoint_id = excluded.parent_checkpoint_id,
        checkpoint_type = excluded.checkpoint_type,
        checkpoint_data = excluded.checkpoint_data,
        metadata = excluded.metadata;
$$;

-- The checkpoint (the thread's latest without p_checkpoint_id) with its pending writes, or null.
create or replace function public.checkpoints_get_tuple(
    p_thread_id text,
    p_checkpoint_ns text,
    p_checkpoint_id text default null
) returns jsonb
language sql
stable
security invoker
set search_path = ''
as $$
    select jsonb_build_object(
        'checkpoint', to_jsonb(c),
        'writes', coalesce(
            (
                select jsonb_agg(to_jsonb(w))
                from (
                    select checkpoint_id, task_id, task_path, idx, channel, value_type, value_data
                    from public.checkpoints_writes
                    where thread_id = c.thread_id and checkpoint_ns = c.checkpoint_ns
                        and checkpoint_id = c.checkpoint_id
                ) w
            ),
            '[]'::jsonb
        )
    )
    from (
        select thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type, checkpoint_data,
            metadata
        from public.checkpoints
        where thread_id = p_thread_id and checkpoint_ns = p_checkpoint_ns
            and (p_checkpoint_id is null or checkpoint_id = p_checkpoint_id)
        order by checkpoint_id desc
        limit 1
    ) c;
$$;

revoke all on function public.checkpoints_put(text, text, text, text, text, text, jsonb),
    public.checkpoints_get_tuple(text, text, text) from public, anon, authenticated;
grant execute on function public.checkpoints_put(text, text, text, text, text, text, jsonb),
    public.checkpoints_get_tuple(text, text, text) to service_role;

notify pgrst, 'reload schema';
