-- Dry run of cleanup_delete.sql: how many messages and ledger rows it would
-- delete (settled messages queued before @cutoff whose replay_until, if
-- any, is before @cutoff too), writing nothing.
WITH doomed AS (
    SELECT q.id FROM engagement_message_queue q
     WHERE q.status IN ('sent', 'failed', 'cancelled')
       AND q.created_at < @cutoff
       AND (q.replay_until IS NULL OR q.replay_until < @cutoff)
)
SELECT (SELECT count(*) FROM doomed) AS messages,
       (SELECT count(*) FROM engagement_processed_messages l WHERE l.message_id IN (SELECT id FROM doomed)) AS ledger
