-- Delivery: claims on queued messages, the send ledger, and the pace shared
-- by every queue-process.

-- A claimed message is 'processing' until claimed_until; past that, its
-- claim is abandoned (the worker died) and the next run settles it.
ALTER TABLE engagement_message_queue
    ADD COLUMN claimed_until       timestamptz,
    ADD COLUMN claimed_by          text,
    ADD COLUMN provider_message_id text;

-- Built here on the scheduler's own queue; on the bot's queue, which may be
-- large and busy, migration 26 builds it CONCURRENTLY instead.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM engagement_adopted_tables WHERE table_name = 'engagement_message_queue') THEN
        CREATE INDEX engagement_message_queue_processing_idx
            ON engagement_message_queue (claimed_until) WHERE status = 'processing';
    END IF;
END
$$;

-- The send ledger: one row per message and transport, written before the
-- external call and updated after it, so a crash between "sent" and "marked
-- sent" is detectable: status 'processing' with no outcome means the
-- outcome is unknown.
CREATE TABLE engagement_processed_messages (
    message_id          uuid        NOT NULL,
    transport           text        NOT NULL,
    status              text        NOT NULL CHECK (status IN ('processing', 'sent', 'failed')),
    attempts            integer     NOT NULL DEFAULT 0,
    first_attempt_at    timestamptz NOT NULL DEFAULT now(),
    last_attempt_at     timestamptz NOT NULL DEFAULT now(),
    provider_message_id text,
    error               text,
    PRIMARY KEY (message_id, transport)
);

-- The next instant a transport may send, shared by every process: each send
-- reserves a slot by moving it one --send-interval ahead.
CREATE TABLE engagement_transport_pacing (
    transport    text        PRIMARY KEY,
    next_send_at timestamptz NOT NULL
);
