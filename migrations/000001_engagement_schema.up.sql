-- The engagement scheduler's schema: users (profile + engagement state), their
-- transactions, the outbound message queue, the transition log and the job-run
-- history. Everything the jobs decide is recorded here; idempotency lives in
-- the unique keys below, not in the jobs.

CREATE TABLE user_profiles (
    user_id               uuid        PRIMARY KEY,
    reengagement_opt_out  boolean     NOT NULL DEFAULT false,
    preferred_destination text        NOT NULL DEFAULT 'individual'
                                      CHECK (preferred_destination IN ('individual', 'group')),
    whatsapp_jid          text,
    group_jid             text,
    locale                text        NOT NULL DEFAULT 'pt-BR',
    created_at            timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE user_engagement_states (
    user_id            uuid        PRIMARY KEY REFERENCES user_profiles (user_id) ON DELETE CASCADE,
    state              text        NOT NULL
                                   CHECK (state IN ('active', 'goodbye_sent', 'help_flow', 'remind_later', 'dormant')),
    last_activity_at   timestamptz NOT NULL,
    goodbye_sent_at    timestamptz,
    goodbye_expires_at timestamptz,
    remind_at          timestamptz,
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- The daily job's three selections: inactive active users (state, then the
-- activity range), expired goodbyes and due reminders. The partial indexes
-- hold only the users in the state that makes the column matter.
CREATE INDEX user_engagement_states_state_last_activity_idx
    ON user_engagement_states (state, last_activity_at);
CREATE INDEX user_engagement_states_goodbye_expires_idx
    ON user_engagement_states (goodbye_expires_at) WHERE state = 'goodbye_sent';
CREATE INDEX user_engagement_states_remind_at_idx
    ON user_engagement_states (remind_at) WHERE state = 'remind_later';

CREATE TABLE transactions (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id    uuid        NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE INDEX transactions_user_created_idx ON transactions (user_id, created_at);

CREATE TABLE engagement_message_queue (
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
CREATE UNIQUE INDEX engagement_message_queue_idempotency_key_idx
    ON engagement_message_queue (idempotency_key) WHERE idempotency_key IS NOT NULL;
-- What queue-process claims: due pending messages, oldest first.
CREATE INDEX engagement_message_queue_pending_idx
    ON engagement_message_queue (scheduled_for) WHERE status = 'pending';

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
