-- The transitions run @run_id logged, in order: one state_changed event each.
SELECT id, user_id::text, from_state, to_state, trigger, created_at
  FROM engagement_state_transitions
 WHERE job_run_id = @run_id
 ORDER BY id
