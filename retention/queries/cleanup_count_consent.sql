-- Dry run of cleanup_delete_consent.sql: how many consent events it would
-- delete (before @cutoff, never a user's latest change nor what came after it).
SELECT count(*) AS consent_events FROM engagement_consent_events c
 WHERE c.created_at < @cutoff
   AND EXISTS (SELECT FROM engagement_consent_events l WHERE l.user_id = c.user_id AND l.id > c.id AND NOT l.superseded)
