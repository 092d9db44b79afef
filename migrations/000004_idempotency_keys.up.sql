-- Idempotency keys (package idempotency): one row per key an operation has
-- seen, kept until expires_at. A key whose expires_at has passed is free to
-- be used again, so the store never needs the cleanup to be correct; the
-- cleanup (DeleteExpired, in batches) only keeps the table small, which is
-- what the index on expires_at is for. result holds the first run's outcome
-- (JSON), returned to duplicates.

CREATE TABLE engagement_idempotency_keys (
    key        text        PRIMARY KEY,
    result     bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

CREATE INDEX engagement_idempotency_keys_expires_at_idx
    ON engagement_idempotency_keys (expires_at);
