-- Dry run of a timer's step (daily_timer.sql): counts, writing nothing,
-- the users it would move, over the whole table: one row, '' with how many
-- users and, with @queue, how many of their messages are queued already
-- (the dry run's queued is the rest: an upper bound, since an opted-out
-- user or one without a destination gets none).
SELECT '' AS skip_reason, count(*)::int,
       count(*) FILTER (WHERE @queue::boolean AND EXISTS (
           SELECT 1 FROM engagement_message_queue q
            WHERE q.idempotency_key = s.user_id::text || @key_infix::text
                                      || coalesce(@key_suffix::text, floor(extract(epoch FROM d.due) * 1000)::bigint::text)))::int,
       0 -- holds out nobody
  FROM user_engagement_states s
 CROSS JOIN LATERAL (
     SELECT engagement_clock(@clock::text, s.last_activity_at, s.created_at, s.remind_at,
                             s.state_entered_at, s.state_changed_xact_at) + @wait::interval AS due
 ) d
 WHERE s.state = ANY(@from_states::text[]) AND d.due <= @as_of::timestamptz
   AND engagement_in_shard(s.user_id, @shard_index::int, @shard_count::int)
