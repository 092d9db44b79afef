-- Check no_send_after_opt_out: no message was sent to a user who had said
-- no, whoever queued it (issue 56: every door). Two ways to have said no:
--
--   an opt-out: the user's latest consent event before sent_at
--     (engagement_consent_events, by id: the order they were recorded in)
--     is an opt-out that took effect more than @grace before the send, or
--     before the message was even queued. An opt-out takes effect at its
--     at, or when it was recorded if later (one reported late cannot stop
--     what went before). A message of a category other than marketing
--     (@categories: the shipped kinds' as JSON; a custom type's is the
--     operator's declared one, engagement_message_types, else marketing)
--     may go to an opted-out user: it is counted as exempt (the opt-out's
--     own confirmation is one).
--   an erasure (engagement_erasures): any message sent more than @grace
--     after it, or queued after it, unless the user opted back in between.
--
-- @grace (queue-process's default claim timeout) lets a message whose
-- request had started when the wish committed go: it is checked just
-- before its request, and its sent_at is stamped when the send settles;
-- a message queued after the wish (and before its send: a row whose
-- created_at is later than its sent_at was written by hand) had no request
-- to start. Users opted out
-- by writing user_profiles.reengagement_opt_out directly leave no event and
-- are not checked; a superseded event (migration 68: older than a wish the
-- user made later) changed nothing and is skipped. Each example names the message, its user and both
-- instants. See verify_goodbye_queued.sql for the statement's shape.
WITH opted_out (id, example, exempt) AS (
    SELECT q.id, q.id::text || ' (user ' || q.user_id::text || ' opted out at ' ||
           to_char(c.since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ', sent at ' ||
           to_char(q.sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ')',
           coalesce(@categories::text::jsonb ->> q.message_type, t.category, 'marketing') <> 'marketing'
      FROM engagement_message_queue q
      JOIN LATERAL (
               SELECT e.opted_out, greatest(e.at, e.created_at) AS since
                 FROM engagement_consent_events e
                WHERE e.user_id = q.user_id AND NOT e.superseded
                  AND greatest(e.at, e.created_at) < q.sent_at
                ORDER BY e.id DESC
                LIMIT 1
           ) c ON c.opted_out AND (c.since + @grace::interval < q.sent_at OR q.created_at > c.since AND q.created_at <= q.sent_at)
      LEFT JOIN engagement_message_types t ON t.message_type = q.message_type
     WHERE q.sent_at IS NOT NULL
       AND EXISTS (SELECT FROM engagement_consent_events e WHERE e.user_id = q.user_id AND e.opted_out AND NOT e.superseded)
), erased (id, example, exempt) AS (
    SELECT q.id, q.id::text || ' (user ' || q.user_id::text || ' erased at ' ||
           to_char(x.erased_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ', sent at ' ||
           to_char(q.sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ')',
           false
      FROM engagement_erasures x
      JOIN engagement_message_queue q
        ON q.user_id = x.user_id AND q.sent_at IS NOT NULL
       AND (x.erased_at + @grace::interval < q.sent_at OR q.created_at > x.erased_at AND q.created_at <= q.sent_at)
     WHERE NOT EXISTS (SELECT FROM engagement_consent_events e
                        WHERE e.user_id = x.user_id AND NOT e.opted_out AND NOT e.superseded
                          AND greatest(e.at, e.created_at) > x.erased_at
                          AND greatest(e.at, e.created_at) < q.sent_at)
), found (example, exempt) AS MATERIALIZED (
    -- A message both arms find counts once, as a violation if either says so.
    SELECT DISTINCT ON (id) example, exempt
      FROM (SELECT * FROM erased UNION ALL SELECT * FROM opted_out) f
     ORDER BY id, exempt
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
