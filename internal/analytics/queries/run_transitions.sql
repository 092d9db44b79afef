-- The transitions run @run_id logged, in order: one state_changed event each,
-- with the goodbye's arm and copy variant (migrations 55 and 57).
SELECT id, user_id::text, from_state, to_state, trigger, created_at, holdout, coalesce(variant, '') AS variant
  FROM engagement_state_transitions
 WHERE job_run_id = @run_id
 ORDER BY id
