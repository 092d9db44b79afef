-- Copy variants (issue 45): a message kind may carry several texts (the
-- catalog's "$variants"; on the Cloud API each its own approved template).
-- The daily job picks a user's variant by a hash of their id and records
-- its name on the queued message and on the goodbye's log row, where the
-- funnel reads it. NULL: the kind's one text (every message before this,
-- every kind without variants, a held-out user's log row).
--
-- Nullable, without a default: no rewrite of the bot's queue or of the
-- log. The queue's column is the scheduler's: the adoption preflight
-- refuses a bot table that has it already.
ALTER TABLE engagement_message_queue
    ADD COLUMN variant text CHECK (length(variant) <= 32);
ALTER TABLE engagement_state_transitions
    ADD COLUMN variant text CHECK (length(variant) <= 32);
