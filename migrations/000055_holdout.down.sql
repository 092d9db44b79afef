ALTER TABLE engagement_state_transitions DROP COLUMN IF EXISTS holdout;
DROP FUNCTION IF EXISTS engagement_holdout_bucket(text, uuid);
