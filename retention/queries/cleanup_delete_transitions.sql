-- Deletes up to @n rows of the state transition log (engagement_state_transitions)
-- logged before @cutoff (cleanup --transitions-older-than), and returns how many.
-- A user's latest row (by id) is never deleted, however old: verify's
-- log_matches_state and goodbye_queued read it, and it says how the user
-- came to their state. The funnel reads 12 weekly cohorts and 30 days
-- after each, so the horizon is at least MinTransitionRetention.
WITH doomed AS (
    SELECT t.id FROM engagement_state_transitions t
     WHERE t.created_at < @cutoff
       AND EXISTS (SELECT FROM engagement_state_transitions l WHERE l.user_id = t.user_id AND l.id > t.id)
     LIMIT @n
)
DELETE FROM engagement_state_transitions t USING doomed WHERE t.id = doomed.id
