-- Whether any message waits on a send budget (the partial index of
-- migration 39 answers it without a lock).
-- not null: waiting
SELECT EXISTS (SELECT FROM engagement_message_queue WHERE status = 'pending' AND deferred_reason = 'budget') AS waiting;
