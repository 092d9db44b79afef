-- Deletes up to @n kept receipts (engagement_receipt_inbox, migration 65)
-- that came before @cutoff and never met their send, and returns how many:
-- receipts of the bot's own conversation, or of a send that was never
-- recorded. A send is recorded within seconds of its request, so a week
-- is far more than any early receipt waits.
WITH doomed AS (
    SELECT i.id FROM engagement_receipt_inbox i
     WHERE i.received_at < @cutoff
     LIMIT @n
)
DELETE FROM engagement_receipt_inbox i USING doomed WHERE i.id = doomed.id
