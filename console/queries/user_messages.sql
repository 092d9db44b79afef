-- One user's messages, newest first (the latest @limit), with WhatsApp's
-- receipts (delivered_at, read_at): never their text, parameters or JID.
SELECT id::text AS id, message_type, status, scheduled_for, sent_at, delivered_at, read_at, coalesce(retry_count, 0) AS retry_count,
       coalesce(cancel_reason, '') AS cancel_reason,
       coalesce(engagement_error_group(error_message), '') AS error, created_at
  FROM engagement_message_queue
 WHERE user_id = @user_id::uuid
 ORDER BY created_at DESC, id
 LIMIT @limit;
