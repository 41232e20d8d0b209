-- Feedback rows of ai_utils.gateway.feedback; request_id joins llm_audit_log.request_id.
create table if not exists llm_feedback (
  id bigint generated always as identity primary key,
  request_id text not null,
  user_id text not null,
  score smallint not null check (score between 1 and 5),
  tenant_id text,
  comment text check (char_length(comment) <= 4000),
  tags jsonb not null default '[]'::jsonb,
  metadata jsonb not null default '{}'::jsonb,
  created_at timestamptz not null default now()
);
create index if not exists llm_feedback_request_idx on llm_feedback (request_id);
alter table llm_feedback enable row level security;
