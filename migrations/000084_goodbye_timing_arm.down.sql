ALTER TABLE engagement_state_transitions DROP COLUMN timing;
