-- One user's moves, oldest first (the latest @limit); a move the bot made
-- has no job run.
SELECT id, from_state, to_state, trigger, job_run_id, created_at
  FROM (SELECT * FROM engagement_state_transitions
         WHERE user_id = @user_id::uuid ORDER BY id DESC LIMIT @limit) t
 ORDER BY id;
