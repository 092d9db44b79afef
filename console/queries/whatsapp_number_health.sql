-- Meta's phone_number_quality_update webhook on @transport's number
-- (console/whatsapp_verdict.go): the messaging limit tier when it carries
-- one (NULL keeps the known tier), the flag when it says FLAGGED or
-- UNFLAGGED (NULL keeps it), triggered at @at (NULL, or a time in the
-- future: now). The quality rating stays what the Graph API last said.
-- Older than what is recorded (Meta resends and reorders): nothing
-- changes (to the second: Meta says when in whole seconds, so a webhook
-- of the second the Graph API was read in counts as newer). UNFLAGGED makes the marketing messages held for the number's
-- quality due now: the next claim sends them, or holds them again while
-- the rating is still RED. Returns whether the health changed and how many
-- messages were released.
--
-- nullable: @messaging_limit_tier, @flagged, @at
WITH recorded AS (
    INSERT INTO engagement_number_health AS h (transport, quality_rating, messaging_limit_tier, flagged, read_at, source)
    VALUES (@transport::text, NULL, @messaging_limit_tier::text, coalesce(@flagged::boolean, false),
            least(coalesce(@at::timestamptz, now()), now()), 'webhook')
        ON CONFLICT (transport) DO UPDATE
       SET messaging_limit_tier = coalesce(EXCLUDED.messaging_limit_tier, h.messaging_limit_tier),
           flagged              = coalesce(@flagged::boolean, h.flagged),
           read_at              = EXCLUDED.read_at,
           source               = EXCLUDED.source
     WHERE date_trunc('second', h.read_at) <= EXCLUDED.read_at
    RETURNING h.flagged
), released AS (
    UPDATE engagement_message_queue q
       SET scheduled_for = now()
     WHERE q.status = 'pending'
       AND q.deferred_reason = 'quality'
       AND q.scheduled_for > now()
       AND @flagged::boolean IS FALSE
       AND EXISTS (SELECT FROM recorded r WHERE NOT r.flagged)
    RETURNING 1
)
SELECT (SELECT count(*) FROM recorded) > 0 AS changed, (SELECT count(*) FROM released) AS released;
