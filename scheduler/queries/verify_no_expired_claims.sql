-- Check no_expired_claims: no message is in flight (processing) past its
-- claim deadline (claimed_until before @as_of, or none); the next
-- queue-process settles such claims from its send ledger. See
-- verify_goodbye_queued.sql for the statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT id::text, false FROM engagement_message_queue
     WHERE status = 'processing' AND (claimed_until < @as_of OR claimed_until IS NULL)
)
SELECT count(*) FILTER (WHERE NOT exempt),
       count(*) FILTER (WHERE exempt),
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}')
  FROM found
