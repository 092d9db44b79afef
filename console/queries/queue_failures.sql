-- Failed messages grouped by reason (engagement_error_group: the error with
-- ids and long numbers masked), largest first: how many, of which kinds,
-- first and last seen (when they were last due), the latest one as a
-- sample; how many failed in the last @window up to @as_of and in the
-- @window before that (when a message failed: when it settled, the later
-- of when it was last due and its last attempt in the send ledger, the
-- instant engagementctl requeue --since filters on); how many of them the
-- transport that failed them called permanent (their error says
-- @permanent_mark, sender/transport's PermanentMark); and, on every row,
-- the failures of the last @window over every group, the shown and the
-- rest.
-- not null: reason, first_seen, last_seen, sample_id, all_last_window
WITH failed AS (
    SELECT q.id, q.message_type, q.scheduled_for, q.error_message,
           greatest(q.scheduled_for, l.at) AS settled
      FROM engagement_message_queue q
      LEFT JOIN LATERAL (
           SELECT max(l.last_attempt_at) AS at
             FROM engagement_processed_messages l
            WHERE l.message_id = q.id
      ) l ON true
     WHERE q.status = 'failed'
)
SELECT engagement_error_group(coalesce(error_message, '')) AS reason,
       count(*) AS messages,
       array_agg(DISTINCT message_type ORDER BY message_type) AS kinds,
       min(scheduled_for) AS first_seen,
       max(scheduled_for) AS last_seen,
       (array_agg(id::text ORDER BY scheduled_for DESC, id))[1] AS sample_id,
       count(*) FILTER (WHERE settled > @as_of::timestamptz - @window::interval
                          AND settled <= @as_of::timestamptz) AS last_window,
       count(*) FILTER (WHERE settled > @as_of::timestamptz - 2 * @window::interval
                          AND settled <= @as_of::timestamptz - @window::interval) AS window_before,
       count(*) FILTER (WHERE strpos(error_message, @permanent_mark::text) > 0) AS permanent,
       sum(count(*) FILTER (WHERE settled > @as_of::timestamptz - @window::interval
                              AND settled <= @as_of::timestamptz)) OVER ()::bigint AS all_last_window
  FROM failed
 GROUP BY 1
 ORDER BY 2 DESC, 1
 LIMIT @max_groups;
