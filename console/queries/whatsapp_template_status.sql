-- Meta's message_template_status_update webhook
-- (console/whatsapp_verdict.go): @template_name's @event, triggered at
-- @at (NULL, or a time in the future: now). PAUSED and DISABLED hold the
-- template's messages, APPROVED and REINSTATED release them; any other
-- event is recorded but leaves a held template held. Older than what is
-- recorded (Meta resends and reorders): nothing changes. A release makes
-- the messages held by a paused template due now: the next claim sends
-- them, or holds again those whose template is still paused. Returns
-- whether the status changed and how many messages were released.
--
-- nullable: @at
WITH recorded AS (
    INSERT INTO engagement_template_status AS t (template_name, status, updated_at)
    VALUES (@template_name::text, @event::text, least(coalesce(@at::timestamptz, now()), now()))
        ON CONFLICT (template_name) DO UPDATE
       SET status     = CASE WHEN t.status IN ('PAUSED', 'DISABLED')
                              AND EXCLUDED.status NOT IN ('PAUSED', 'DISABLED', 'APPROVED', 'REINSTATED')
                             THEN t.status ELSE EXCLUDED.status END,
           updated_at = EXCLUDED.updated_at
     WHERE date_trunc('second', t.updated_at) <= EXCLUDED.updated_at
    RETURNING t.status
), released AS (
    UPDATE engagement_message_queue q
       SET scheduled_for = now()
     WHERE q.status = 'pending'
       AND q.deferred_reason = 'template_paused'
       AND q.scheduled_for > now()
       AND EXISTS (SELECT FROM recorded r WHERE r.status IN ('APPROVED', 'REINSTATED'))
    RETURNING 1
)
SELECT (SELECT count(*) FROM recorded) > 0 AS changed, (SELECT count(*) FROM released) AS released;
