-- Dry run of step goodbye_timeout (goodbye_sent -goodbye_timeout-> dormant):
-- counts, writing nothing, the users daily_goodbye_timeout.sql would move,
-- over the whole table (to dormant, or back to active for an undelivered
-- goodbye, as engagement_goodbye_due decides): one row, '' and how many
-- users (and 0, 0: it queues nothing and holds out nobody).
SELECT '' AS skip_reason, count(*)::int, 0, 0
  FROM user_engagement_states s
  JOIN user_profiles p ON p.user_id = s.user_id
  LEFT JOIN engagement_message_queue q
    ON q.idempotency_key = s.user_id::text || @key_infix::text
                           || to_char(s.goodbye_sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
 WHERE s.state = @from_state
   AND engagement_goodbye_due(@as_of::timestamptz, @goodbye_window::interval,
                              p.reengagement_opt_out, s.goodbye_sent_at, s.goodbye_expires_at,
                              q.status, q.in_doubt, q.sent_at, q.delivered_at,
                              (SELECT max(l.last_attempt_at) FROM engagement_processed_messages l
                                WHERE l.message_id = q.id)) IS NOT NULL
   AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
