-- Deletes up to @n consent events (engagement_consent_events, migration
-- 52) recorded before @cutoff (cleanup --consent-older-than), and returns
-- how many. A user's latest change (by id; not a superseded call,
-- migration 68, which changed nothing) is never deleted, however old: it
-- is the record of their standing choice (an opt-out most of all), kept as
-- long as the user is; nor is a superseded call recorded after it.
WITH doomed AS (
    SELECT c.id FROM engagement_consent_events c
     WHERE c.created_at < @cutoff
       AND EXISTS (SELECT FROM engagement_consent_events l WHERE l.user_id = c.user_id AND l.id > c.id AND NOT l.superseded)
     LIMIT @n
)
DELETE FROM engagement_consent_events c USING doomed WHERE c.id = doomed.id
