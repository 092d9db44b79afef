-- Check no_expired_claims: no message is in flight (processing) whose
-- claim is abandoned at @as_of (engagement_claim_abandoned: its holder's
-- lease ran out, or, for a claim without a holder row, claimed_until is
-- before @as_of or unset); the next queue-process settles such claims from
-- its send ledger. See
-- verify_goodbye_queued.sql for the statement's shape.
WITH found (example, exempt) AS MATERIALIZED (
    SELECT id::text, false FROM engagement_message_queue
     WHERE status = 'processing' AND engagement_claim_abandoned(claimed_by, claimed_until, @as_of)
)
SELECT count(*) FILTER (WHERE NOT exempt) AS violations,
       count(*) FILTER (WHERE exempt) AS exempt,
       coalesce((SELECT array_agg(example ORDER BY example)
                   FROM (SELECT example FROM found WHERE NOT exempt ORDER BY example LIMIT @max_examples) e),
                '{}') AS examples
  FROM found
