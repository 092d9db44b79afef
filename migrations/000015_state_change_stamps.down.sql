DROP TRIGGER IF EXISTS engagement_stamp_state_change ON user_engagement_states;
DROP FUNCTION IF EXISTS engagement_stamp_state_change();
ALTER TABLE engagement_state_transitions DROP COLUMN IF EXISTS logged_at;
ALTER TABLE user_engagement_states DROP COLUMN IF EXISTS state_changed_xact_at;
ALTER TABLE user_engagement_states DROP COLUMN IF EXISTS state_changed_at;
