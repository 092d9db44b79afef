-- engagementctl cancel: cancel the pending messages that match every given
-- filter (status 'cancelled', cancel_reason 'operator'); a NULL (or empty
-- @ids) filter matches everything, and with no filter at all nothing
-- matches unless @all. The idempotency key stays, so a re-run of the job
-- that queued a message does not queue it again.
--
-- Only 'pending' rows are touched, re-checked by the UPDATE itself: a
-- message a queue-process is claiming waits for that claim to commit and is
-- then 'processing', which this leaves alone (in flight: it is being sent).
-- So this is safe while queue-process runs. With @dry_run nothing changes
-- and the count is what would have been cancelled.
--
-- nullable: @user_id, @message_type, @idempotency_key
WITH matched AS (
    SELECT q.id
      FROM engagement_message_queue q
     WHERE q.status = 'pending'
       AND (cardinality(coalesce(@ids::uuid[], '{}')) = 0 OR q.id = ANY (@ids::uuid[]))
       AND (@user_id::uuid IS NULL OR q.user_id = @user_id::uuid)
       AND (@message_type::text IS NULL OR q.message_type = @message_type::text)
       AND (@idempotency_key::text IS NULL OR q.idempotency_key = @idempotency_key::text)
       AND (@all::boolean
            OR cardinality(coalesce(@ids::uuid[], '{}')) > 0
            OR @user_id::uuid IS NOT NULL
            OR @message_type::text IS NOT NULL
            OR @idempotency_key::text IS NOT NULL)
), cancelled AS (
    -- A message in doubt (its request may have reached the receiver before
    -- a crash) stays pending with the operator's reason: the next claim
    -- asks the receiver first, records it sent if it had it, and cancels
    -- it otherwise; it is never sent again either way (claim.sql).
    UPDATE engagement_message_queue q
       SET status = CASE WHEN coalesce(q.in_doubt, false) THEN 'pending' ELSE 'cancelled' END,
           cancel_reason = 'operator'
      FROM matched m
     WHERE q.id = m.id
       AND q.status = 'pending'
       AND NOT @dry_run::boolean
    RETURNING q.id
)
SELECT CASE WHEN @dry_run::boolean THEN (SELECT count(*) FROM matched)
            ELSE (SELECT count(*) FROM cancelled) END AS cancelled;
