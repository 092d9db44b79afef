-- Failed messages grouped by reason (engagement_error_group: the error with
-- ids and long numbers masked), largest first: how many, of which kinds,
-- first and last seen (when they were last due), and the latest one as a
-- sample.
SELECT engagement_error_group(coalesce(error_message, '')) AS reason,
       count(*) AS messages,
       array_agg(DISTINCT message_type ORDER BY message_type) AS kinds,
       min(scheduled_for) AS first_seen,
       max(scheduled_for) AS last_seen,
       (array_agg(id::text ORDER BY scheduled_for DESC, id))[1] AS sample_id
  FROM engagement_message_queue
 WHERE status = 'failed'
 GROUP BY 1
 ORDER BY 2 DESC, 1
 LIMIT @max_groups;
