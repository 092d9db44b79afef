-- One user's state, timers and profile (no JID: the page shows its last
-- four digits only, masked here so that the whole never leaves the database).
-- remind_at is remind_later's timer only: the bot leaves the column set when
-- the user moves on, and a stale one would read as a reminder to come.
--
-- The goodbye backoff (migration 67): how many goodbyes in a row failed
-- for good since the user last wrote, when the next may go (NULL: no wait,
-- or none until they write: held), and the WhatsApp code of their last
-- goodbye's failure, so the page can say why. A user who wrote since their
-- last goodbye is held back by nothing, whatever the columns say.
--
-- nullable: last_activity_at
SELECT s.state, s.last_activity_at, s.goodbye_sent_at, s.goodbye_expires_at,
       CASE WHEN s.state = 'remind_later' THEN s.remind_at END AS remind_at, s.created_at,
       b.failures AS goodbye_failures,
       CASE WHEN isfinite(b.retry_at) THEN b.retry_at END AS goodbye_retry_at,
       coalesce(NOT isfinite(b.retry_at), false) AS goodbye_held,
       coalesce((SELECT engagement_failure_code(q.error_message) FROM engagement_message_queue q
                  WHERE q.idempotency_key = s.user_id::text || @goodbye_key_infix::text
                                            || to_char(s.goodbye_sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
                    AND q.status = 'failed'), '') AS goodbye_failure_code,
       coalesce(p.reengagement_opt_out, false) AS opted_out,
       coalesce(p.preferred_destination, '') AS destination,
       coalesce(right(regexp_replace(split_part(p.whatsapp_jid, '@', 1), '[^0-9]', '', 'g'), 4), '') AS jid_last4,
       p.user_id IS NOT NULL AS has_profile
  FROM user_engagement_states s
  LEFT JOIN user_profiles p ON p.user_id = s.user_id
 CROSS JOIN LATERAL (
     SELECT CASE WHEN s.goodbye_retry_at IS NOT NULL
                  AND NOT coalesce(s.last_activity_at, s.created_at) > s.goodbye_sent_at
                 THEN s.goodbye_retry_at END AS retry_at,
            s.goodbye_failures AS failures
 ) b
 WHERE s.user_id = @user_id::uuid;
