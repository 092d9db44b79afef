-- Check no_send_after_opt_out: no message was sent while its user was
-- opted out. For each message with a sent_at (accepted by the transport,
-- whatever receipts said afterwards), the user's latest consent event
-- before sent_at (engagement_consent_events, migration 52, by id: the
-- order they were recorded in) must not be an opt-out that took effect
-- more than @grace before it. An opt-out takes effect at its at, or when
-- it was recorded if later (one reported late cannot stop what went
-- before). @grace (queue-process's default claim timeout) lets a message
-- whose send had started when the opt-out committed go: it is checked just
-- before its send, and its sent_at is stamped when the send settles.
-- Users opted out by writing user_profiles.reengagement_opt_out directly
-- leave no event and are not checked; a superseded event (migration 68:
-- older than a wish the user made later) changed nothing and is skipped. The opt-out's own confirmation (the
-- kinds in @confirmations) is sent only while its user is opted out: it is
-- counted as exempt. Each example names the message, its
-- user and both instants. See verify_goodbye_queued.sql for the
-- statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT q.id::text || ' (user ' || q.user_id::text || ' opted out at ' ||
           to_char(c.since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ', sent at ' ||
           to_char(q.sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ')',
           q.message_type = ANY(@confirmations::text[])
      FROM engagement_message_queue q
      JOIN LATERAL (
               SELECT e.opted_out, greatest(e.at, e.created_at) AS since
                 FROM engagement_consent_events e
                WHERE e.user_id = q.user_id AND NOT e.superseded
                  AND greatest(e.at, e.created_at) < q.sent_at
                ORDER BY e.id DESC
                LIMIT 1
           ) c ON c.opted_out AND c.since + @grace::interval < q.sent_at
     WHERE q.sent_at IS NOT NULL
       AND EXISTS (SELECT FROM engagement_consent_events e WHERE e.user_id = q.user_id AND e.opted_out AND NOT e.superseded)
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
