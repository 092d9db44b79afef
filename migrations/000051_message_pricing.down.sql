-- The columns are the scheduler's (the adoption preflight refused a bot
-- table that had them): dropped with what they held.
ALTER TABLE engagement_message_queue DROP COLUMN IF EXISTS pricing_category, DROP COLUMN IF EXISTS billable;
