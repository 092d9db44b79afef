-- The engagement scheduler's schema: users (profile + engagement state), their
-- transactions, the outbound message queue, the transition log and the job-run
-- history. Everything the jobs decide is recorded here; idempotency lives in
-- the unique keys below, not in the jobs.
--
-- The first four tables are the bot's: on the bot's own database its
-- migrations created them first, with its rows in them. There they are
-- adopted as they are (docs/migrations.md, "Adopting the bot's database"):
-- CREATE TABLE IF NOT EXISTS keeps every row, column, default, constraint,
-- index and policy the bot defined, engagement_adopted_tables records which
-- tables were the bot's and with which columns (so that no down migration
-- ever drops them), and the only additions are nullable columns. Their
-- indexes are built CONCURRENTLY by migrations 21 to 25, so the bot's writes
-- never wait on a build. Before this file runs, the migrator has checked
-- that the bot's tables can serve (migrations.Inspect) and refused,
-- changing nothing, where they cannot.

CREATE TABLE engagement_adopted_tables (
    table_name text        PRIMARY KEY,
    columns    text[]      NOT NULL,   -- the bot's columns when it was adopted
    adopted_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO engagement_adopted_tables (table_name, columns)
SELECT c.relname, array_agg(a.attname::text ORDER BY a.attnum)
  FROM pg_class c
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.oid IN (to_regclass('user_profiles'), to_regclass('user_engagement_states'),
                 to_regclass('transactions'), to_regclass('engagement_message_queue'))
 GROUP BY c.relname;

CREATE TABLE IF NOT EXISTS user_profiles (
    user_id               uuid        PRIMARY KEY,
    reengagement_opt_out  boolean     NOT NULL DEFAULT false,
    preferred_destination text        NOT NULL DEFAULT 'individual'
                                      CHECK (preferred_destination IN ('individual', 'group')),
    whatsapp_jid          text,
    group_jid             text,
    locale                text        NOT NULL DEFAULT 'pt-BR',
    created_at            timestamptz NOT NULL DEFAULT now()
);
-- The bot's design has no group routing yet.
ALTER TABLE user_profiles ADD COLUMN IF NOT EXISTS group_jid text;

CREATE TABLE IF NOT EXISTS user_engagement_states (
    user_id            uuid        PRIMARY KEY REFERENCES user_profiles (user_id) ON DELETE CASCADE,
    state              text        NOT NULL
                                   CHECK (state IN ('active', 'goodbye_sent', 'help_flow', 'remind_later', 'dormant')),
    last_activity_at   timestamptz NOT NULL,
    goodbye_sent_at    timestamptz,
    goodbye_expires_at timestamptz,
    remind_at          timestamptz,
    updated_at         timestamptz NOT NULL DEFAULT now()
);
-- Every move stamps it.
ALTER TABLE user_engagement_states ADD COLUMN IF NOT EXISTS updated_at timestamptz;

CREATE TABLE IF NOT EXISTS transactions (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id    uuid        NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS engagement_message_queue (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id         uuid        NOT NULL,
    message_type    text        NOT NULL,
    message_key     text,
    message_params  jsonb       NOT NULL DEFAULT '{}',
    destination     text        NOT NULL CHECK (destination IN ('individual', 'group')),
    destination_jid text        NOT NULL,
    scheduled_for   timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz,
    status          text        NOT NULL DEFAULT 'pending'
                                CHECK (status IN ('pending', 'processing', 'sent', 'failed', 'cancelled')),
    retry_count     integer     NOT NULL DEFAULT 0,
    error_message   text,
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- One message per idempotency key, ever: the jobs insert with
-- ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING.
-- The bot's queue has its own unique key on the column (Inspect requires
-- it), which serves the same ON CONFLICT: no second copy is built there.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM engagement_adopted_tables WHERE table_name = 'engagement_message_queue') THEN
        CREATE UNIQUE INDEX engagement_message_queue_idempotency_key_idx
            ON engagement_message_queue (idempotency_key) WHERE idempotency_key IS NOT NULL;
    END IF;
END
$$;

CREATE TABLE engagement_job_runs (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job         text        NOT NULL,
    as_of       timestamptz NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    status      text        NOT NULL DEFAULT 'running'
                            CHECK (status IN ('running', 'succeeded', 'partial', 'failed', 'abandoned')),
    counters    jsonb,
    error       text,
    hostname    text,
    pid         integer
);

CREATE INDEX engagement_job_runs_job_started_idx ON engagement_job_runs (job, started_at DESC);

CREATE TABLE engagement_state_transitions (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    uuid        NOT NULL,
    from_state text        NOT NULL,
    to_state   text        NOT NULL,
    trigger    text        NOT NULL,
    job_run_id bigint,     -- engagement_job_runs.id of the run that applied it (no FK: the log outlives pruned runs)
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX engagement_state_transitions_user_idx ON engagement_state_transitions (user_id, id);
