-- Deletes up to @n consent events (engagement_consent_events, migration
-- 52) recorded before @cutoff (cleanup --consent-older-than), and returns
-- how many. A user's latest event (by id) is never deleted, however old:
-- it is the record of their standing choice (an opt-out most of all),
-- kept as long as the user is.
WITH doomed AS (
    SELECT c.id FROM engagement_consent_events c
     WHERE c.created_at < @cutoff
       AND EXISTS (SELECT FROM engagement_consent_events l WHERE l.user_id = c.user_id AND l.id > c.id)
     LIMIT @n
)
DELETE FROM engagement_consent_events c USING doomed WHERE c.id = doomed.id
