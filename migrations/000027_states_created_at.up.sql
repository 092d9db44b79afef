-- When the bot started tracking a user. The bot's user_engagement_states has
-- it (created_at, DEFAULT now()) and may leave last_activity_at NULL for a
-- user who has done nothing yet: the daily job then counts their silence
-- from created_at (docs/jobs.md, "Users with no recorded activity"). The
-- scheduler's own table has last_activity_at NOT NULL and never reads it:
-- the column is added, nullable and without a default, only so that the
-- same statements run on both.
ALTER TABLE user_engagement_states ADD COLUMN IF NOT EXISTS created_at timestamptz;

-- A database migrated before this release has no record of adopted
-- tables (migration 1 creates it now): none of its tables was the bot's.
-- Migration 28 and the down migrations read it.
CREATE TABLE IF NOT EXISTS engagement_adopted_tables (
    table_name text        PRIMARY KEY,
    columns    text[]      NOT NULL,
    adopted_at timestamptz NOT NULL DEFAULT now()
);
