-- Deletes up to @n settled messages (sent, failed, cancelled) past the
-- retention, with their send ledger rows, and returns how many of each.
-- Past the retention: queued before @cutoff, and no job re-run with an
-- --as-of inside the retention window could produce the message's key
-- again: its replay_until (set when it was queued: the end of the goodbye's
-- day, of the review's ISO week) is before @cutoff too; a message without
-- one (no key, or queued by the bot) counts from when it was queued. No
-- key's text is read. Pending and in-flight messages are never touched;
-- rows another transaction holds are left for the next batch.
WITH doomed AS (
    SELECT q.id FROM engagement_message_queue q
     WHERE q.status IN ('sent', 'failed', 'cancelled')
       AND q.created_at < @cutoff
       AND (q.replay_until IS NULL OR q.replay_until < @cutoff)
     LIMIT @n
       FOR UPDATE SKIP LOCKED
), ledger AS (
    DELETE FROM engagement_processed_messages l USING doomed WHERE l.message_id = doomed.id RETURNING 1
), gone AS (
    DELETE FROM engagement_message_queue q USING doomed WHERE q.id = doomed.id RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS messages, (SELECT count(*) FROM ledger) AS ledger
