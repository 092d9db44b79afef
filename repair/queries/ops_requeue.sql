-- engagementctl requeue: put the messages in @status ('failed' or
-- 'cancelled') that match every given filter back to 'pending', due now,
-- with retry_count 0 and no error_message or cancel_reason. The id and the
-- idempotency key stay, so a receiver that de-duplicates by key drops a
-- message it already has. A NULL (or empty @ids) filter matches everything.
--
-- Only rows in @status are touched, re-checked by the UPDATE itself: a
-- message in flight ('processing'), pending or sent is never changed, so
-- this is safe while queue-process runs. With @dry_run nothing changes and
-- the count is what would have been requeued.
--
-- @since (inclusive) and @until (exclusive) filter on when the message
-- settled: the later of when it came due (scheduled_for) and its latest
-- attempt in the send ledger. That is when the last attempt of a failed
-- message was made, and when a message cancelled at claim time came due
-- (it is cancelled when a queue-process reaches it, not later than its
-- backlog); no column records the instant of a cancellation itself.
--
-- nullable: @message_type, @reason, @error_contains, @error_group, @since, @until
WITH matched AS (
    SELECT q.id
      FROM engagement_message_queue q
      LEFT JOIN LATERAL (
           SELECT max(l.last_attempt_at) AS at
             FROM engagement_processed_messages l
            WHERE l.message_id = q.id
      ) l ON true
     WHERE q.status = @status::text
       AND (cardinality(coalesce(@ids::uuid[], '{}')) = 0 OR q.id = ANY (@ids::uuid[]))
       AND (@message_type::text IS NULL OR q.message_type = @message_type::text)
       AND (@reason::text IS NULL OR q.cancel_reason = @reason::text)
       AND (@error_contains::text IS NULL
            OR strpos(lower(q.error_message), lower(@error_contains::text)) > 0)
       AND (@error_group::text IS NULL OR engagement_error_group(q.error_message) = @error_group::text)
       AND (@since::timestamptz IS NULL OR greatest(q.scheduled_for, l.at) >= @since::timestamptz)
       AND (@until::timestamptz IS NULL OR greatest(q.scheduled_for, l.at) < @until::timestamptz)
), requeued AS (
    UPDATE engagement_message_queue q
       SET status = 'pending',
           retry_count = 0,
           error_message = NULL,
           in_doubt = false,
           cancel_reason = NULL,
           scheduled_for = now(),
           sent_at = NULL,
           claimed_by = NULL,
           claimed_until = NULL
      FROM matched m
     WHERE q.id = m.id
       AND q.status = @status::text
       AND NOT @dry_run::boolean
    RETURNING q.id
)
SELECT CASE WHEN @dry_run::boolean THEN (SELECT count(*) FROM matched)
            ELSE (SELECT count(*) FROM requeued) END AS requeued;
