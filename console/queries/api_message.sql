-- One queued message as POST /api/messages answers it: never its params
-- (the text's contents), its JID as its last four digits only.
SELECT id::text AS id, user_id::text AS user_id, message_type, coalesce(message_key, '') AS message_key, destination,
       coalesce(right(regexp_replace(split_part(destination_jid, '@', 1), '[^0-9]', '', 'g'), 4), '') AS jid_last4,
       status, scheduled_for, sent_at, coalesce(idempotency_key, '') AS idempotency_key, period_start, replay_until, created_at
  FROM engagement_message_queue
 WHERE id = @id::uuid;
