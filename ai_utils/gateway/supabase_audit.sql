-- Audit rows of ai_utils.gateway (one row per model call). Run once in the Supabase SQL editor or with psql.
create table if not exists llm_audit_log (
  request_id text primary key,
  feature text not null,
  provider text not null,
  model text not null,
  status text not null check (status in ('succeeded', 'failed', 'blocked', 'pending')),
  actor jsonb,
  tenant_id text,
  latency_ms double precision not null default 0,
  usage jsonb,
  tools_requested jsonb not null default '[]'::jsonb,
  tools_used jsonb not null default '[]'::jsonb,
  policy_decisions jsonb not null default '[]'::jsonb,
  request_hash text,
  request_summary text,
  response_summary text,
  error_type text,
  error_message text,
  parent_run_id text,
  metadata jsonb not null default '{}'::jsonb,
  created_at timestamptz not null default now()
);
create index if not exists llm_audit_log_tenant_created_idx on llm_audit_log (tenant_id, created_at desc);
create index if not exists llm_audit_log_feature_created_idx on llm_audit_log (feature, created_at desc);
-- Only the service role may read or write audit rows.
alter table llm_audit_log enable row level security;
