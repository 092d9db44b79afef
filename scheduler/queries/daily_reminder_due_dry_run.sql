-- Dry run of step reminder_due (remind_later -reminder_due-> dormant):
-- counts, writing nothing, the users daily_reminder_due.sql would move,
-- over the whole table: one row, '' with how many users and, with
-- @send_reminder, how many of their reminders are queued already (the
-- dry run's queued is the rest: an upper bound, since an opted-out user or
-- one without a destination gets none).
SELECT '' AS skip_reason, count(*)::int,
       count(*) FILTER (WHERE @send_reminder::boolean AND EXISTS (
           SELECT 1 FROM engagement_message_queue q
            WHERE q.idempotency_key = s.user_id::text || @key_infix::text
                                      || floor(extract(epoch FROM s.remind_at) * 1000)::bigint::text))::int
  FROM user_engagement_states s
 WHERE s.state = @from_state AND engagement_reminder_due(@as_of::timestamptz, s.remind_at)
   AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
