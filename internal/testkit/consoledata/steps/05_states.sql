-- The users' engagement states. state_changed_at (and its transaction
-- time) is when the last move happened, never the clock: verify's
-- log_matches_state compares it with the log's logged_at, which the log
-- step sets to the move's created_at likewise. updated_at is the later of
-- that move and the last activity (the bot stamps updated_at on every
-- message, changing the state or not).
INSERT INTO user_engagement_states (user_id, state, last_activity_at, goodbye_sent_at, goodbye_expires_at, remind_at,
                                    updated_at, state_changed_at, state_changed_xact_at, state_entered_at, created_at)
SELECT user_id, (ARRAY['active', 'goodbye_sent', 'help_flow', 'remind_later', 'dormant'])[state],
       la, gs_at, ge_at, remind_at, updated_at, t1, t1, t1, created_at
  FROM consoledata.users
 ORDER BY user_id
