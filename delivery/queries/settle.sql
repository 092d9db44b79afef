-- Record the outcomes of attempts, on the messages and in the send ledger
-- together, for the messages @holder still holds (the fencing check): a
-- message whose claim was taken over is left to its new holder. Outcome
-- 'pending' is a failed attempt to retry after retry_in; the ledger row of
-- that attempt says 'failed'. attempted is 1 when the attempt reached the
-- transport and was not counted when it started, else 0. Rows are locked in
-- id order, the one order every statement on claimed rows takes, before
-- any is changed. in_doubt is true for an attempt whose outcome is unknown
-- (it may have reached a receiver that cannot de-duplicate: failed, never
-- sent again; or one that can: retried under its same key, never cancelled
-- without asking the receiver first), false for any other. sent_at and a retry's time are on the processor's clock,
-- @clock_offset ahead of the database's (0 but in a simulation). A message
-- whose user was erased while its send was in flight (destination_jid '':
-- erase_scrub.sql leaves a claimed message to its holder) is recorded as
-- the others, but without the provider id (a Cloud API wamid encodes the
-- phone number) and with its error text '[erased]', in the queue and the
-- ledger: the settle never brings the erased number back.
WITH outcome AS (
    -- '' in @provider_ids and @errors is none (NULL).
    SELECT o.id, o.status, nullif(o.provider_id, '') AS provider_id, o.retry_in,
           nullif(o.error, '') AS error, o.attempted, o.in_doubt, o.spent
      FROM unnest(@ids::uuid[], @statuses::text[], @provider_ids::text[], @retry_ins::interval[],
                  @errors::text[], @attempted::int[], @in_doubt::boolean[], @spent::boolean[])
           AS o(id, status, provider_id, retry_in, error, attempted, in_doubt, spent)
), mine AS (
    -- Each row locked by a primary-key probe, in id order (the outer
    -- rows'), then the fencing check on the row as locked (its newest
    -- version). With the fencing check planned into the scan, statistics
    -- from before the claims (a queue analyzed while all of it was
    -- pending) made the processing index look like one row, and the
    -- planner read every row every process had claimed to find the
    -- batch's (issue 59).
    SELECT l.id
      FROM (SELECT id FROM unnest(@ids::uuid[]) AS b(id) ORDER BY id) b
     CROSS JOIN LATERAL (SELECT q.id, q.status, q.claimed_by FROM engagement_message_queue q
                          WHERE q.id = b.id OFFSET 0 FOR UPDATE) l
     WHERE l.status = 'processing'
       AND l.claimed_by = @holder
), settled AS (
    UPDATE engagement_message_queue q
       SET status = o.status,
           sent_at = CASE WHEN o.status = 'sent' THEN now() + @clock_offset::interval END,
           provider_message_id = CASE WHEN q.destination_jid = '' THEN NULL
                                      ELSE coalesce(o.provider_id, q.provider_message_id) END,
           retry_count = coalesce(q.retry_count, 0) + CASE WHEN o.status = 'pending' AND o.spent THEN 1 ELSE 0 END,
           scheduled_for = CASE WHEN o.status = 'pending' THEN now() + @clock_offset::interval + o.retry_in ELSE q.scheduled_for END,
           error_message = CASE WHEN q.destination_jid = '' AND o.error IS NOT NULL THEN '[erased]' ELSE o.error END,
           -- A retry, or a failure, keeps the doubt of an earlier attempt:
           -- its request may have reached the receiver all the same.
           in_doubt = CASE WHEN o.status = 'sent' THEN o.in_doubt ELSE coalesce(q.in_doubt, false) OR o.in_doubt END,
           claimed_until = NULL,
           claimed_by = NULL
      FROM outcome o
      JOIN mine m ON m.id = o.id
     WHERE q.id = o.id
       -- The ids again, as an array: joined to the CTEs alone, the planner
       -- may hash every row of the queue.
       AND q.id = ANY (ARRAY(SELECT id FROM mine))
    RETURNING q.id, q.destination_jid = '' AS erased
)
INSERT INTO engagement_processed_messages AS l (message_id, transport, status, attempts, provider_message_id, error)
SELECT o.id, @transport, CASE WHEN o.status = 'pending' THEN 'failed' ELSE o.status END, o.attempted,
       CASE WHEN s.erased THEN NULL ELSE o.provider_id END,
       CASE WHEN s.erased AND o.error IS NOT NULL THEN '[erased]' ELSE o.error END
  FROM outcome o
  JOIN settled s ON s.id = o.id
    ON CONFLICT (message_id, transport) DO UPDATE
   SET status = EXCLUDED.status,
       attempts = l.attempts + EXCLUDED.attempts,
       last_attempt_at = now(),
       provider_message_id = coalesce(EXCLUDED.provider_message_id, l.provider_message_id),
       error = EXCLUDED.error
RETURNING message_id::text;
