-- Dry run of cleanup_delete_transitions.sql: how many rows of the state
-- transition log it would delete (before @cutoff, never a user's latest).
SELECT count(*) AS transitions FROM engagement_state_transitions t
 WHERE t.created_at < @cutoff
   AND EXISTS (SELECT FROM engagement_state_transitions l WHERE l.user_id = t.user_id AND l.id > t.id)
